// Times the real @daytonaio/sdk against ptd beside the native API driven
// from the same node process (node's fetch): SDK create → executeCommand
// ('true') → delete against native create (wait_for_state=running, the
// size a Daytona create gets by default: 1 vCPU, 1 GiB, 3 GiB) → exec
// ["/bin/sh","-c","true"] → delete, interleaved one of each in turn, N
// times, printed as p50/p95/p99 with the SDK's ratios. `go run
// ./bench/daytona` starts a ptd and runs it; standalone:
//
//   PT_API_URL=http://HOST:PORT PT_TOKEN=… node bench.mjs [-n 50] [-t busybox] [--json]
//
// Between runs it waits (untimed) until the deleted sandbox is torn down,
// so runs never overlap a teardown.
import { Daytona } from '@daytonaio/sdk'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', short: 'n', default: '50' },
    template: { type: 'string', short: 't', default: 'busybox' },
    warmup: { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
  },
})
const n = Number(args.n)
const api = process.env.PT_API_URL
const key = process.env.PT_TOKEN
if (!api || !key) throw new Error('set PT_API_URL and PT_TOKEN')
const daytona = new Daytona({ apiUrl: `${api}/daytona/api`, apiKey: key })
const h = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }

async function waitGone(id) {
  for (let i = 0; i < 4000; i++) {
    const body = await (await fetch(`${api}/v1/sandboxes/${id}?include_deleted=true`, { headers: h })).text()
    if (body.includes('"state":"deleted"')) return
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`sandbox ${id} was not torn down`)
}

async function sdkRun() {
  const t0 = performance.now()
  const sb = await daytona.create({ snapshot: args.template, autoStopInterval: 0 })
  const tc = performance.now()
  const r = await sb.process.executeCommand('true')
  const te = performance.now()
  if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`)
  await sb.delete()
  const t1 = performance.now()
  await waitGone(sb.id)
  return { total: t1 - t0, create: tc - t0, exec: te - tc, del: t1 - te }
}

async function nativeRun() {
  const t0 = performance.now()
  const sb = await (await fetch(`${api}/v1/sandboxes?wait_for_state=running`, { method: 'POST', headers: h, body: JSON.stringify({ template: args.template, cpu: 1, ram_mb: 1024, disk_gb: 3 }) })).json()
  const tc = performance.now()
  const res = await fetch(`${api}/v1/sandboxes/${sb.id}/exec`, { method: 'POST', headers: h, body: JSON.stringify({ cmd: ['/bin/sh', '-c', 'true'] }) })
  const body = await res.text()
  const te = performance.now()
  if (!body.includes('"exit_code":0')) throw new Error(`native exec: ${res.status} ${body}`)
  await (await fetch(`${api}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: h })).text()
  const t1 = performance.now()
  await waitGone(sb.id)
  return { total: t1 - t0, create: tc - t0, exec: te - tc, del: t1 - te }
}

const sdk = []
const native = []
for (let i = -Number(args.warmup); i < n; i++) {
  const s = await sdkRun()
  const nt = await nativeRun()
  if (i >= 0) { sdk.push(s); native.push(nt) }
}

function pct(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const at = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
  return { p50: at(50), p95: at(95), p99: at(99) }
}

if (args.json) {
  console.log(JSON.stringify({ sdk, native }))
} else {
  console.log(`Daytona SDK vs native API from node: ${n} runs each, template ${args.template}`)
  for (const part of ['total', 'create', 'exec', 'del']) {
    const a = pct(native.map((x) => x[part]))
    const b = pct(sdk.map((x) => x[part]))
    const f = (p) => `p50 ${p.p50.toFixed(1)} ms  p95 ${p.p95.toFixed(1)} ms  p99 ${p.p99.toFixed(1)} ms`
    console.log(`native ${part.padEnd(7)} ${f(a)}`)
    console.log(`SDK    ${part.padEnd(7)} ${f(b)}  (p50 ${(b.p50 / a.p50).toFixed(2)}x)`)
  }
}
