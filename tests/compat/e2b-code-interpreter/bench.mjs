// Times the real @e2b/code-interpreter SDK against ptd: steady-state
// runCode('1+1') round trips in one sandbox, and Sandbox.create → first
// runCode('1+1') result (the kernel's start included) in new ones.
// `go run ./bench -only-code` runs it beside the native API; standalone:
//
//   E2B_API_URL=… E2B_SANDBOX_URL=… E2B_API_KEY=… node bench.mjs [-n 50] [--first 10] [--json]
import { Sandbox } from '@e2b/code-interpreter'
import { parseArgs } from 'node:util'

const { values: args } = parseArgs({
  options: {
    n: { type: 'string', short: 'n', default: '50' },
    first: { type: 'string', default: '10' },
    json: { type: 'boolean', default: false },
  },
})

async function one(sbx) {
  const t0 = performance.now()
  const ex = await sbx.runCode('1+1')
  const ms = performance.now() - t0
  if (ex.text !== '2') throw new Error(`runCode('1+1') = ${JSON.stringify(ex.text)} (${ex.error?.name ?? 'no error'})`)
  return ms
}

const first = []
for (let i = 0; i < Number(args.first); i++) {
  const t0 = performance.now()
  const sbx = await Sandbox.create()
  await one(sbx)
  first.push(performance.now() - t0)
  await sbx.kill()
}
const sbx = await Sandbox.create()
const steady = []
try {
  await one(sbx) // the kernel is up
  for (let i = 0; i < Number(args.n); i++) steady.push(await one(sbx))
} finally {
  await sbx.kill()
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]
}
if (args.json) console.log(JSON.stringify({ first_ms: first, steady_ms: steady }))
else
  for (const [name, xs] of [['create → first runCode(1+1)', first], ['steady runCode(1+1)', steady]])
    console.log(`${name}: p50 ${pct(xs, 50).toFixed(1)} ms  p95 ${pct(xs, 95).toFixed(1)} ms  p99 ${pct(xs, 99).toFixed(1)} ms  (${xs.length} runs)`)
