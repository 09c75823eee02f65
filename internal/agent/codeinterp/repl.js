// Platinum's JavaScript context: cells from server.py (one JSON line each
// on stdin) run in one persistent `vm` context, so globals and top-level
// declarations survive across cells. Events go back as JSON lines on
// stdout; console output is captured in the context, in order with results.
// An interrupt breaks a running synchronous cell (breakOnSigint) or
// abandons an awaited promise; the context stays.
//
// Interrupts come from server.py as lines ("<seq>\n", the cell's number)
// on a pipe (--interrupt-fd), never as a SIGINT from outside: node has no
// SIGINT handler for a moment as breakOnSigint's watchdog starts (vm has
// just removed the process's SIGINT listeners) and as it stops (node's
// exit-on-SIGINT handler is back until vm re-adds them), and a SIGINT
// landing there ended the process and the context's state with it. A
// worker thread reads the pipe and sends the SIGINT itself, and only while
// the cell is "armed": between the two marks made inside the breakOnSigint
// run that wraps the cell's (armed below), where node's watchdog surely
// holds SIGINT. The mark and the worker's claim of it are one compare-and-swap
// on shared memory, so the cell cannot leave the armed part between the
// worker's check and its signal; a cell that finds its mark claimed waits,
// still inside the run, for the signal to land. An awaited cell is
// told by a message instead (the main thread is free then).
'use strict';
const vm = require('vm');
const util = require('util');
const readline = require('readline');
const fs = require('fs');
const { Worker } = require('worker_threads');

// The cell's state, one word: its number (seq) << 2 | phase.
const IDLE = 0; const ARMED = 1; const FIRING = 2; const AWAITING = 3;
const SEQ_MASK = 0x1fffffff;
const state = new Int32Array(new SharedArrayBuffer(4));
const word = (seq, phase) => (((seq & SEQ_MASK) << 2) | phase);
const fdArg = process.argv.find((a) => a.startsWith('--interrupt-fd='));
if (fdArg) {
  const w = new Worker(`
    const { workerData: { state, fd }, parentPort } = require('worker_threads');
    const net = require('net');
    let buf = '';
    new net.Socket({ fd, readable: true, writable: false }).on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\\n')) >= 0) {
        const seq = Number(buf.slice(0, i)) & ${SEQ_MASK};
        buf = buf.slice(i + 1);
        const cur = Atomics.load(state, 0);
        if ((cur >>> 2) !== seq) continue; // late: that cell has ended
        const phase = cur & 3;
        if (phase === ${ARMED} && Atomics.compareExchange(state, 0, cur, (cur & ~3) | ${FIRING}) === cur) {
          // The process group: a cell's child processes (execSync) stop too.
          try { process.kill(-process.pid, 'SIGINT'); } catch (_) { process.kill(process.pid, 'SIGINT'); }
        } else if (phase === ${AWAITING}) {
          parentPort.postMessage(seq);
        }
      }
    }).on('error', () => {});
  `, { eval: true, workerData: { state, fd: Number(fdArg.split('=')[1]) } });
  w.on('message', (seq) => { if ((Atomics.load(state, 0) >>> 2) === seq && abandon) abandon(); });
  w.on('error', (e) => process.stderr.write(`interrupt thread: ${e && e.stack}\n`));
  w.unref();
}

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
// A SIGINT from elsewhere between cells is ignored (and abandons an
// awaited cell); the server's interrupts come through the worker.
process.on('SIGINT', () => { if (abandon) abandon(); });

// armed runs fn() (the cell's run, with no watchdog of its own) marked
// armed for cell seq, inside a breakOnSigint run: node's watchdog holds
// SIGINT from before the mark until after the unmark. The SIGINT ends
// everything inside that run (fn and this function's code, uncatchably),
// and the run throws ERR_SCRIPT_EXECUTION_INTERRUPTED. So a cell that
// reaches the unmark and finds the mark claimed by the worker has not had
// the SIGINT yet: it waits for it, still inside the run. Returns
// { value } or { error }.
const armContext = vm.createContext({ go: null });
const armScript = new vm.Script('go()', { filename: 'armed' });
function armed(seq, fn) {
  let out = null;
  armContext.go = () => {
    Atomics.store(state, 0, word(seq, ARMED));
    try { out = { value: fn() }; } catch (e) { out = { error: e }; }
    if (Atomics.compareExchange(state, 0, word(seq, ARMED), word(seq, IDLE)) !== word(seq, ARMED)) {
      for (;;) { /* the worker's SIGINT ends this */ }
    }
  };
  try {
    armScript.runInContext(armContext, { breakOnSigint: true });
  } catch (e) {
    out = { error: e }; // interrupted
  } finally {
    armContext.go = null;
    Atomics.store(state, 0, word(seq, IDLE));
  }
  return out;
}

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
  const seq = req.seq || 0;
  // The sandbox's env as it changed since the last cell (removals too).
  for (const k of req.unset || []) delete process.env[k];
  for (const [k, v] of Object.entries(req.env || {})) process.env[k] = v;
  const saved = {};
  for (const [k, v] of Object.entries(req.call_env || {})) { saved[k] = process.env[k]; process.env[k] = v; }
  const cwd = process.cwd();
  try {
    if (req.cwd) process.chdir(req.cwd);
    const script = new vm.Script(compile(req.code), { filename: `<cell ${count}>` });
    // displayErrors: false: node's decoration of an error (the source line
    // above its stack) can swallow a SIGINT's termination that lands as
    // the cell throws, and armed() would then wait for it in vain.
    const out = armed(seq, () => script.runInContext(context, { displayErrors: false }));
    if (out.error) throw out.error;
    let value = out.value;
    if (value && typeof value.then === 'function') {
      value = await new Promise((resolve, reject) => {
        abandon = () => reject(Object.assign(new Error('interrupted'), { name: 'KeyboardInterrupt' }));
        Atomics.store(state, 0, word(seq, AWAITING));
        value.then(resolve, reject);
      });
    }
    if (value !== undefined) send(result(value));
  } catch (e) {
    send(errorEvent(e));
  } finally {
    abandon = null;
    Atomics.store(state, 0, word(seq, IDLE));
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
