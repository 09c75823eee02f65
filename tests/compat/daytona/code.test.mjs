// codeRun and the stateful interpreter through the real Daytona SDK
// (lib.mjs): on the code-interpreter template's kernels, and on a fresh
// interpreter per call where a template has none (python-node).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sdk, create, toolbox } from './lib.mjs';

// kernelSandbox is one python code-interpreter sandbox the kernel tests
// share (a kernel's first start is the slow part on a loaded machine).
let kernels;
async function kernelSandbox() {
  kernels ??= create({ snapshot: 'code-interpreter' });
  return kernels;
}

test('codeRun without kernels: a fresh interpreter per call, said in the answer', async () => {
  const sb = await create(); // python-node has python3 and node, no code interpreter
  let r = await sb.process.codeRun('import sys\nx = 45\nprint(x, sys.argv[1:])', { argv: ['a'] });
  assert.equal(r.exitCode, 0);
  assert.equal(r.result.trim(), "45 ['a']");
  r = await sb.process.codeRun('print(x)');
  assert.equal(r.exitCode, 1, 'no state carries over');
  assert.match(r.result, /NameError/);
  assert.equal((await sb.process.codeRun('raise SystemExit(4)')).exitCode, 4);
  const raw = await toolbox(sb, 'POST', '/process/code-run', { code: 'print(1)', language: 'python' });
  assert.match(raw.body.interpreter, /fresh python3 process per call: no state is kept/);

  const js = await create({ language: 'javascript' });
  assert.equal((await js.process.codeRun('console.log(6 * 7)')).result.trim(), '42');

  // TypeScript: types stripped, then run by node (types are not checked).
  const ts = await create({ language: 'typescript' });
  r = await ts.process.codeRun([
    'interface Box<T> { value: T }',
    'const b: Box<number> = { value: 6 * 7 };',
    'enum Colour { Red = "red" }',
    'console.log(b.value as number, Colour.Red, process.argv.slice(1).join("+"));',
  ].join('\n'), { argv: ['x', 'y'] });
  assert.equal(r.exitCode, 0, r.result);
  assert.equal(r.result.trim(), '42 red x+y');
  r = await ts.process.codeRun('const n: number = ;');
  assert.equal(r.exitCode, 1);
  assert.match(r.result, /code\.ts:1:\d+: SyntaxError/);
  assert.match((await toolbox(ts, 'POST', '/process/code-run', { code: '1', language: 'typescript' })).body.interpreter, /fresh node process/);

  // The stateful interpreter needs kernels: a clear refusal here.
  await assert.rejects(sb.codeInterpreter.runCode('x = 1'), (e) => e instanceof sdk.DaytonaError && /no code interpreter/.test(e.message));
  await assert.rejects(sb.codeInterpreter.createContext(), (e) => e.statusCode === 400 && /no code interpreter/.test(e.message));
});

test('codeRun on the code-interpreter kernels: state kept, TypeScript, charts', async () => {
  const sb = await kernelSandbox();
  let r = await sb.process.codeRun('x = 20');
  assert.equal(r.exitCode, 0, r.result);
  r = await sb.process.codeRun('print(x * 2)');
  assert.equal(r.result, '40\n', 'the kernel kept x between calls');
  const raw = await toolbox(sb, 'POST', '/process/code-run', { code: 'print(x)', language: 'python' });
  assert.match(raw.body.interpreter, /code interpreter, context ctx_default_python: state is kept/);
  r = await sb.process.codeRun('print("before")\n1 / 0');
  assert.equal(r.exitCode, 1);
  assert.match(r.result, /^before\n[\s\S]*ZeroDivisionError/);
  r = await sb.process.codeRun([
    'import matplotlib.pyplot as plt',
    'plt.plot([1, 2, 3], [4, 1, 9])',
    'plt.title("t")',
    'plt.show()',
  ].join('\n'));
  assert.equal(r.exitCode, 0, r.result);
  assert.equal(r.artifacts.charts.length, 1);
  assert.equal(Buffer.from(r.artifacts.charts[0].png, 'base64').subarray(1, 4).toString(), 'PNG');
  // argv needs a process command line: that call runs fresh, and says so.
  r = await sb.process.codeRun('import sys; print(sys.argv[1:])', { argv: ['z'] });
  assert.equal(r.result.trim(), "['z']");

  const ts = await create({ snapshot: 'code-interpreter', language: 'typescript' });
  r = await ts.process.codeRun('const total: number = [1, 2, 3].reduce((a: number, b: number) => a + b, 0);');
  assert.equal(r.exitCode, 0, r.result);
  r = await ts.process.codeRun('console.log(`total=${total as number}`)');
  assert.equal(r.result, 'total=6\n', 'the TypeScript context kept total');
});

test('the stateful interpreter: contexts, default context, errors, timeout', async () => {
  const sb = await kernelSandbox();
  const out = [];
  let r = await sb.codeInterpreter.runCode('import sys\nn = 7\nprint("out", n)\nprint("err", file=sys.stderr)', {
    onStdout: (m) => out.push(m.output),
  });
  assert.equal(r.stdout, 'out 7\n');
  assert.equal(r.stderr, 'err\n');
  assert.equal(r.error, undefined);
  assert.deepEqual(out, ['out 7\n'], 'streamed as it came');
  r = await sb.codeInterpreter.runCode('print(n + 1)');
  assert.equal(r.stdout, '8\n', 'the default context kept n');

  const ctx = await sb.codeInterpreter.createContext('/tmp');
  assert.ok(ctx.id);
  assert.equal(ctx.cwd, '/tmp');
  assert.equal(ctx.language, 'python');
  r = await sb.codeInterpreter.runCode('import os\nprint(os.getcwd(), "n" in globals())', { context: ctx });
  assert.equal(r.stdout, '/tmp False\n', 'a context of its own, in its cwd');
  r = await sb.codeInterpreter.runCode('undefined_name', { context: ctx });
  assert.equal(r.error.name, 'NameError');
  assert.match(r.error.traceback, /NameError/);
  r = await sb.codeInterpreter.runCode('import os\nprint(os.environ["CELL"])', { context: ctx, envs: { CELL: 'only-here' } });
  assert.equal(r.stdout, 'only-here\n');
  const ids = (await sb.codeInterpreter.listContexts()).map((c) => c.id);
  assert.deepEqual(ids, [ctx.id], 'the default context is not listed');
  await assert.rejects(sb.codeInterpreter.runCode('import time\ntime.sleep(30)', { timeout: 1 }), sdk.DaytonaTimeoutError);
  r = await sb.codeInterpreter.runCode('print(n)');
  assert.equal(r.stdout, '7\n', 'the timed-out cell was interrupted, the context kept its state');
  await sb.codeInterpreter.deleteContext(ctx);
  assert.deepEqual(await sb.codeInterpreter.listContexts(), []);
  await assert.rejects(sb.codeInterpreter.runCode('1', { context: ctx }), sdk.DaytonaError);
});
