// Times the real e2b SDK against ptd: Sandbox.create → commands.run('true')
// → kill, N times, and prints p50/p95/p99. `go run ./bench/e2b` runs it
// beside the same loop on the native API; standalone:
//
//   E2B_API_URL=… E2B_SANDBOX_URL=… E2B_API_KEY=… node bench.mjs [-n 50] [-t base] [--json]
//
// Between runs it waits (untimed) until the killed sandbox is torn down,
// through the native API, so runs never overlap a teardown.
import { Sandbox } from 'e2b'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', short: 'n', default: '50' },
    template: { type: 'string', short: 't', default: 'base' },
    warmup: { type: 'string', default: '2' },
    json: { type: 'boolean', default: false },
  },
})
const n = Number(args.n)
const api = process.env.E2B_API_URL
const key = process.env.E2B_API_KEY
if (!api || !process.env.E2B_SANDBOX_URL || !key) throw new Error('set E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY')

async function waitGone(id) {
  for (let i = 0; i < 2000; i++) {
    const res = await fetch(`${api}/v1/sandboxes/${id}?include_deleted=true`, { headers: { Authorization: `Bearer ${key}` } })
    const body = await res.text()
    if (body.includes('"state":"deleted"')) return
    await new Promise((r) => setTimeout(r, 5))
  }
  throw new Error(`sandbox ${id} was not torn down`)
}

// nativeRun is the native loop (create → exec `bash -l -c true`) through
// node's own fetch: the same client runtime as the SDK, so the SDK's ratio
// against it is what ptd's E2B layer and the SDK's JS add, without the
// gap between node's and Go's HTTP clients.
async function nativeRun() {
  const h = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' }
  const t0 = performance.now()
  const sb = await (await fetch(`${api}/v1/sandboxes?wait_for_state=running`, { method: 'POST', headers: h, body: JSON.stringify({ template: args.template }) })).json()
  const res = await fetch(`${api}/v1/sandboxes/${sb.id}/exec`, { method: 'POST', headers: h, body: JSON.stringify({ cmd: ['/bin/bash', '-l', '-c', 'true'] }) })
  const body = await res.text()
  const t1 = performance.now()
  if (!body.includes('"exit_code":0')) throw new Error(`native exec: ${res.status} ${body}`)
  await (await fetch(`${api}/v1/sandboxes/${sb.id}`, { method: 'DELETE', headers: h })).text()
  await waitGone(sb.id)
  return t1 - t0
}

const createRun = []
const create = []
const kill = []
const nativeNode = []
for (let i = -Number(args.warmup); i < n; i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create(args.template)
  const tc = performance.now()
  const r = await sbx.commands.run('true')
  const t1 = performance.now()
  if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`)
  await sbx.kill()
  const t2 = performance.now()
  await waitGone(sbx.sandboxId)
  if (i >= 0) {
    createRun.push(t1 - t0)
    create.push(tc - t0)
    kill.push(t2 - t1)
  }
  const tn = await nativeRun()
  if (i >= 0) nativeNode.push(tn)
}

function pct(xs) {
  const s = [...xs].sort((a, b) => a - b)
  const at = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
  return { p50: at(50), p95: at(95), p99: at(99) }
}

if (args.json) {
  console.log(JSON.stringify({ create_run_ms: createRun, create_ms: create, kill_ms: kill, native_node_create_run_ms: nativeNode }))
} else {
  for (const [name, xs] of [['SDK create → commands.run("true")', createRun], ['SDK create alone', create], ['SDK kill', kill], ['native (node fetch) create → bash -l -c true', nativeNode]]) {
    const p = pct(xs)
    console.log(`${name.padEnd(40)} p50 ${p.p50.toFixed(2)}ms  p95 ${p.p95.toFixed(2)}ms  p99 ${p.p99.toFixed(2)}ms  (n=${xs.length})`)
  }
}
