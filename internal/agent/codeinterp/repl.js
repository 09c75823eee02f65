// Platinum's JavaScript context: cells from server.py (one JSON line each
// on stdin) run in one persistent `vm` context, so globals and top-level
// declarations survive across cells. Events go back as JSON lines on
// stdout; console output is captured in the context, in order with results.
// SIGINT breaks a running synchronous cell (breakOnSigint) or abandons an
// awaited promise; the context stays.
'use strict';
const vm = require('vm');
const util = require('util');
const readline = require('readline');
const fs = require('fs');

function send(ev) { fs.writeSync(1, JSON.stringify(ev) + '\n'); }
// A plain sink for the cell's console, not a stream.Writable: SIGINT ends
// a cell wherever it is (breakOnSigint), inside a write too, and a
// Writable left "writing" would hold back every later console line of the
// context. Here an interrupted write loses at most itself.
function stream(name) {
  return { write(chunk) { send({ type: name, text: String(chunk) }); return true; } };
}
// A TypeScript context strips each cell's types before running it (Debian's
// typescript; transpile only, so types are not checked, as tsx and
// esbuild do). Cells with import/export become CommonJS, hence `exports`.
const ts = process.argv.includes('--typescript') ? require('typescript') : null;
function compile(code) {
  if (!ts) return code;
  const out = ts.transpileModule(code, {
    reportDiagnostics: true,
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, esModuleInterop: true },
  });
  const d = (out.diagnostics || [])[0];
  if (d) {
    const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
    throw Object.assign(new SyntaxError(msg), { stack: `SyntaxError: ${msg}` + (at ? `\n    at <cell>:${at.line + 1}:${at.character + 1}` : '') });
  }
  return out.outputText;
}
const cons = new console.Console({ stdout: stream('stdout'), stderr: stream('stderr'), ignoreErrors: false });
const sandbox = { console: cons, require, process, Buffer, setTimeout, clearTimeout, setInterval, clearInterval,
  setImmediate, clearImmediate, queueMicrotask, URL, URLSearchParams, TextEncoder, TextDecoder, fetch: globalThis.fetch,
  structuredClone, module: { exports: {} }, __filename: '<cell>', __dirname: process.cwd() };
sandbox.exports = sandbox.module.exports;
sandbox.globalThis = sandbox;
const context = vm.createContext(sandbox);
let count = 0;
let abandon = null;
process.on('SIGINT', () => { if (abandon) abandon(); });

function errorEvent(e) {
  if (e && typeof e === 'object' && 'stack' in e) {
    // The cell's frames only: cut where vm (and this file) begin.
    const lines = String(e.stack).split('\n');
    const cut = lines.findIndex((l) => /^\s+at .*(node:vm|sigintHandlersWrap)/.test(l));
    return { type: 'error', name: e.name || 'Error', value: e.message || String(e),
      traceback: (cut > 0 ? lines.slice(0, cut) : lines).join('\n') };
  }
  return { type: 'error', name: 'Error', value: util.inspect(e), traceback: '' };
}

function result(v) {
  const data = { 'text/plain': typeof v === 'string' ? util.inspect(v) : util.inspect(v, { depth: 4 }) };
  if (v !== null && typeof v === 'object') {
    try { data['application/json'] = JSON.parse(JSON.stringify(v)); } catch (_) { /* not JSON */ }
  }
  return { type: 'result', is_main_result: true, data };
}

async function run(req) {
  count++;
  // The sandbox's env as it changed since the last cell (removals too).
  for (const k of req.unset || []) delete process.env[k];
  for (const [k, v] of Object.entries(req.env || {})) process.env[k] = v;
  const saved = {};
  for (const [k, v] of Object.entries(req.call_env || {})) { saved[k] = process.env[k]; process.env[k] = v; }
  const cwd = process.cwd();
  try {
    if (req.cwd) process.chdir(req.cwd);
    let value = new vm.Script(compile(req.code), { filename: `<cell ${count}>` }).runInContext(context, { breakOnSigint: true });
    if (value && typeof value.then === 'function') {
      value = await new Promise((resolve, reject) => {
        abandon = () => reject(Object.assign(new Error('interrupted'), { name: 'KeyboardInterrupt' }));
        value.then(resolve, reject);
      });
    }
    if (value !== undefined) send(result(value));
  } catch (e) {
    send(errorEvent(e));
  } finally {
    abandon = null;
    try { process.chdir(cwd); } catch (_) { /* gone */ }
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    send({ type: 'end', execution_count: count });
  }
}

let chain = Promise.resolve();
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line);
  chain = chain.then(() => run(req));
});
