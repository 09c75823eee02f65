// The real @e2b/code-interpreter SDK against ptd (see ci_test.go).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inflateSync } from 'node:zlib';
import { Sandbox } from '@e2b/code-interpreter';

// decodePNG decodes a PNG far enough to prove it is one: the signature,
// IHDR's size, and IDAT inflating to exactly one filter byte plus a row of
// pixels per scanline. Returns [width, height].
function decodePNG(bytes) {
  assert.deepEqual([...bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  let width = 0, height = 0, bitDepth = 0, colorType = 0, interlace = 0;
  const idat = [];
  for (let off = 8; off < bytes.length;) {
    const len = bytes.readUInt32BE(off);
    const type = bytes.toString('latin1', off + 4, off + 8);
    const data = bytes.subarray(off + 8, off + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0); height = data.readUInt32BE(4);
      bitDepth = data[8]; colorType = data[9]; interlace = data[12];
    } else if (type === 'IDAT') idat.push(data);
    else if (type === 'IEND') break;
    off += 12 + len;
  }
  assert.equal(interlace, 0, 'an interlaced PNG');
  const channels = { 0: 1, 2: 3, 3: 1, 4: 2, 6: 4 }[colorType];
  const raw = inflateSync(Buffer.concat(idat));
  assert.equal(raw.length, height * (1 + Math.ceil((width * channels * bitDepth) / 8)), 'IDAT does not match IHDR');
  return [width, height];
}

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
  const [w, h] = decodePNG(Buffer.from(png.png, 'base64'));
  assert.ok(w >= 100 && h >= 100, `png of ${w}x${h}`);
});

test('onStdout, onStderr, onResult and onError see each message as it comes', async () => {
  const seen = [];
  const ex = await sbx.runCode(
    "import sys\nfrom IPython.display import display, SVG, JSON\nprint('out', flush=True)\nprint('err', file=sys.stderr, flush=True)\n" +
      "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"><rect width=\"2\" height=\"2\"/></svg>'))\n" +
      "display(JSON({'k': [1, 2]}))\nraise ValueError('late')",
    {
      onStdout: (m) => seen.push(`stdout ${m.line.trim()}`),
      onStderr: (m) => seen.push(`stderr ${m.line.trim()}`),
      onResult: (r) => seen.push(`result ${r.formats().filter((f) => f !== 'text').join('+')}`),
      onError: (e) => seen.push(`error ${e.name}`),
    },
  );
  assert.deepEqual(seen, ['stdout out', 'stderr err', 'result svg', 'result json', 'error ValueError']);
  assert.deepEqual(ex.logs.stderr.map((s) => s.trim()), ['err']);
  assert.match(ex.results[0].svg, /<rect/);
  assert.deepEqual(ex.results[1].json, { k: [1, 2] });
  assert.equal(ex.error.value, 'late');
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
  await sbx.runCode('shared_default = 1');
  assert.equal((await sbx.runCode("'shared_default' in globals()", { context: a })).text, 'False');
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

test('a cell that kills its kernel is an error; the next says so on stderr and runs fresh', async () => {
  const ctx = await sbx.createCodeContext();
  await sbx.runCode('doomed = 1', { context: ctx });
  const died = await sbx.runCode('import os\nos._exit(3)', { context: ctx });
  assert.equal(died.error.name, 'KernelDied');
  const stderr = [];
  const next = await sbx.runCode("'doomed' in globals()", { context: ctx, onStderr: (m) => stderr.push(m.line) });
  assert.equal(next.text, 'False');
  assert.match(next.logs.stderr.join(''), /^\[platinum\] the kernel died/);
  assert.deepEqual(stderr, next.logs.stderr);
  assert.deepEqual((await sbx.runCode('1', { context: ctx })).logs.stderr, []);
  await sbx.removeCodeContext(ctx);
});
