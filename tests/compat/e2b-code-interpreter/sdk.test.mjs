// The real @e2b/code-interpreter SDK against ptd (see ci_test.go).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sandbox } from '@e2b/code-interpreter';

let sbx;
before(async () => { sbx = await Sandbox.create({ timeoutMs: 10 * 60 * 1000 }); });
after(async () => { if (sbx) await sbx.kill(); });

test('create names the code-interpreter template', async () => {
  const info = await sbx.getInfo();
  assert.equal(info.templateId, 'code-interpreter');
});

test('runCode keeps state across calls', async () => {
  await sbx.runCode('x = 41');
  const ex = await sbx.runCode('x + 1');
  assert.equal(ex.error, undefined);
  assert.equal(ex.text, '42');
  assert.ok(ex.executionCount >= 2, `executionCount ${ex.executionCount}`);
});

test('matplotlib figure is a PNG that decodes', async () => {
  const ex = await sbx.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.show()');
  assert.equal(ex.error, undefined, ex.error && ex.error.traceback);
  const png = ex.results.find((r) => r.png);
  assert.ok(png, `no png among ${JSON.stringify(ex.results.map((r) => r.formats()))}`);
  const bytes = Buffer.from(png.png, 'base64');
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.ok(bytes.length > 1000, `png of ${bytes.length} bytes`);
});

test('DataFrame is HTML', async () => {
  const ex = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})");
  assert.equal(ex.error, undefined);
  const main = ex.results.find((r) => r.isMainResult);
  assert.match(main.html, /<table/);
  assert.match(main.html, /<td>x<\/td>/);
  assert.match(main.text, /a\s+b/);
});

test('1/0 is ZeroDivisionError with a traceback, and the context still works', async () => {
  const ex = await sbx.runCode('1/0');
  assert.equal(ex.error.name, 'ZeroDivisionError');
  assert.match(ex.error.value, /division by zero/);
  assert.match(ex.error.traceback, /ZeroDivisionError/);
  assert.equal((await sbx.runCode('x * 2')).text, '82');
});

test('onStdout streams before the cell ends', async () => {
  const seen = [];
  const start = Date.now();
  const ex = await sbx.runCode("import time\nprint('first', flush=True)\ntime.sleep(1.5)\nprint('second')", {
    onStdout: (m) => seen.push({ line: m.line, at: Date.now() }),
  });
  const end = Date.now();
  assert.deepEqual(seen.map((s) => s.line.trim()), ['first', 'second']);
  assert.deepEqual(ex.logs.stdout.map((s) => s.trim()), ['first', 'second']);
  // The first line arrived while the cell was still sleeping.
  assert.ok(end - seen[0].at >= 1000, `first line ${end - seen[0].at} ms before the end (start ${start})`);
});

test('a 2 s timeout interrupts while True, and the context keeps its variables', async () => {
  await sbx.runCode('kept = "still here"');
  await assert.rejects(sbx.runCode('while True:\n    pass', { timeoutMs: 2000 }), (e) => e.name === 'TimeoutError');
  // The server interrupted the kernel when the SDK went away.
  let ex;
  for (let i = 0; i < 20; i++) {
    ex = await sbx.runCode('kept');
    if (!ex.error) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(ex.text, "'still here'");
});

test('two contexts do not share state', async () => {
  const a = await sbx.createCodeContext({ language: 'python' });
  const b = await sbx.createCodeContext();
  assert.notEqual(a.id, b.id);
  await sbx.runCode('secret = 7', { context: a });
  assert.equal((await sbx.runCode('secret', { context: a })).text, '7');
  const other = await sbx.runCode('secret', { context: b });
  assert.equal(other.error.name, 'NameError');
  const ids = (await sbx.listCodeContexts()).map((c) => c.id);
  assert.ok(ids.includes(a.id) && ids.includes(b.id), `contexts ${ids}`);
  await sbx.restartCodeContext(a);
  assert.equal((await sbx.runCode('secret', { context: a })).error.name, 'NameError');
  await sbx.removeCodeContext(a);
  await sbx.removeCodeContext(b);
  assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === a.id));
});

test('JavaScript keeps state', async () => {
  await sbx.runCode('var n = 20; globalThis.m = 1', { language: 'js' });
  const ex = await sbx.runCode('console.log("hi"); n + m + 21', { language: 'js' });
  assert.equal(ex.error, undefined);
  assert.equal(ex.text, '42');
  assert.deepEqual(ex.logs.stdout, ['hi\n']);
});

test('per-call envs reach the cell and last only for it', async () => {
  const ex = await sbx.runCode("import os\nos.environ.get('PT_CI_VAR')", { envs: { PT_CI_VAR: 'v1' } });
  assert.equal(ex.text, "'v1'");
  assert.equal((await sbx.runCode("repr(os.environ.get('PT_CI_VAR'))")).text, "'None'");
});
