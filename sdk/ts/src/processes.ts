/**
 * Background processes in a sandbox (`/v1/sandboxes/{id}/processes`):
 * start one with its output streamed, reconnect to its output later, send
 * it input, signal it, resize its PTY. Unlike exec, closing an output
 * stream does not end the process.
 */
import { type CallContext, type RequestOptions, type Transport, withContext } from "./http.js";
import { type Command, EventStream, type OutputCallbacks, openStream } from "./exec.js";
import type { ProcessInfo, ProcessInputBody, ProcessSignalName, ProcessStartBody, PtySize } from "./types.js";

export type { ProcessInfo };

export interface ProcessStartOptions extends RequestOptions, OutputCallbacks {
  env?: Record<string, string>;
  cwd?: string;
  /** A label to find the process by in list(). */
  tag?: string;
  /** Keep standard input open for sendInput (default false: stdin is closed). */
  stdin?: boolean;
  /** Run under a pseudo-terminal of this size; output then arrives as `pty` events. */
  pty?: PtySize;
  /** Kills the process after this many milliseconds. */
  commandTimeoutMs?: number;
}

/** A signal name the API accepts (others are refused with InvalidRequestError, field `signal`). */
export type Signal = ProcessSignalName | (string & {});

/** Input for a process: text, bytes, or `{ eof: true }` alone to close its stdin. */
export type ProcessInput = string | Uint8Array;

function b64(data: Uint8Array): string {
  let s = "";
  for (let i = 0; i < data.length; i += 0x8000) s += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(s);
}

/** The processes of one sandbox. Get it from `sandbox.processes`. */
export class Processes {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly id: string,
  ) {}

  private path(pid?: number, tail = ""): string {
    const base = `/v1/sandboxes/${encodeURIComponent(this.id)}/processes`;
    return pid === undefined ? base : `${base}/${pid}${tail}`;
  }

  /**
   * Starts cmd in the background and streams its output; resolves once it
   * started (the handle's `pid` is set). Read the output by iterating the
   * handle, with the callbacks, or not at all; `wait()` returns the exit.
   */
  async start(cmd: Command, opts?: ProcessStartOptions): Promise<ProcessHandle> {
    if (Array.isArray(cmd) ? cmd.length === 0 : !cmd) throw new TypeError("processes.start: empty command");
    const body: ProcessStartBody = { cmd };
    if (opts?.env) body.env = opts.env;
    if (opts?.cwd) body.cwd = opts.cwd;
    if (opts?.tag) body.tag = opts.tag;
    if (opts?.stdin) body.stdin = true;
    if (opts?.pty) body.pty = opts.pty;
    if (opts?.commandTimeoutMs !== undefined) body.timeout_ms = Math.max(1, Math.ceil(opts.commandTimeoutMs));
    const s = await openStream(this.t, { method: "POST", path: this.path(), query: { stream: "true" }, json: body }, opts, opts ?? {});
    await s._readStart();
    return new ProcessHandle(this, s);
  }

  /** Lists the sandbox's running processes. */
  async list(opts?: RequestOptions): Promise<ProcessInfo[]> {
    return withContext(opts, async (ctx) => {
      const { data } = await this.t.json<{ processes?: ProcessInfo[] }>({ method: "GET", path: this.path() }, ctx);
      return data.processes ?? [];
    });
  }

  /** Streams a running process's output from now on, ending with its exit. An unknown pid throws NotFoundError. */
  async connect(pid: number, opts?: RequestOptions & OutputCallbacks): Promise<ProcessHandle> {
    const s = await openStream(this.t, { method: "GET", path: this.path(pid, "/stream") }, opts, opts ?? {});
    s.pid = pid;
    return new ProcessHandle(this, s);
  }

  /** Writes to the process's stdin (or PTY); `eof` closes stdin afterwards. */
  async sendInput(pid: number, data: ProcessInput, opts?: RequestOptions & { eof?: boolean }): Promise<void> {
    const body: ProcessInputBody = typeof data === "string" ? { data } : { data_b64: b64(data) };
    if (opts?.eof) body.eof = true;
    await this.post(pid, "/input", body, opts);
  }

  /** Closes the process's stdin. */
  async closeStdin(pid: number, opts?: RequestOptions): Promise<void> {
    await this.post(pid, "/input", { eof: true }, opts);
  }

  /** Sends a signal (`SIGTERM`, `SIGKILL`, `SIGINT`, `SIGHUP`, …). */
  async signal(pid: number, signal: Signal, opts?: RequestOptions): Promise<void> {
    await this.post(pid, "/signal", { signal }, opts);
  }

  /** Resizes the process's PTY. */
  async resize(pid: number, size: PtySize, opts?: RequestOptions): Promise<void> {
    await this.post(pid, "/resize", size, opts);
  }

  /** Kills the process (SIGKILL). */
  async kill(pid: number, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx: CallContext) => this.t.send({ method: "DELETE", path: this.path(pid) }, ctx).then((r) => r.body?.cancel()));
  }

  private async post(pid: number, tail: string, json: unknown, opts?: RequestOptions): Promise<void> {
    await withContext(opts, async (ctx) => {
      const res = await this.t.send({ method: "POST", path: this.path(pid, tail), json }, ctx);
      await res.body?.cancel();
    });
  }
}

/** A started or connected process: its output stream plus the calls that act on it. */
export class ProcessHandle implements AsyncIterable<import("./exec.js").ExecEvent> {
  /** @internal */
  constructor(
    private readonly procs: Processes,
    readonly stream: EventStream,
  ) {}

  /** The process id inside the sandbox. */
  get pid(): number {
    return this.stream.pid ?? -1;
  }

  /** The exit, once it arrived on the stream. */
  get exit() {
    return this.stream.exit;
  }

  [Symbol.asyncIterator]() {
    return this.stream[Symbol.asyncIterator]();
  }

  /** Reads the output to the end (to the callbacks) and returns the exit. */
  wait() {
    return this.stream.wait();
  }

  /** Stops reading the output; the process keeps running. */
  disconnect() {
    return this.stream.close();
  }

  sendInput(data: ProcessInput, opts?: RequestOptions & { eof?: boolean }) {
    return this.procs.sendInput(this.pid, data, opts);
  }

  closeStdin(opts?: RequestOptions) {
    return this.procs.closeStdin(this.pid, opts);
  }

  signal(signal: Signal, opts?: RequestOptions) {
    return this.procs.signal(this.pid, signal, opts);
  }

  resize(size: { cols: number; rows: number }, opts?: RequestOptions) {
    return this.procs.resize(this.pid, size, opts);
  }

  kill(opts?: RequestOptions) {
    return this.procs.kill(this.pid, opts);
  }
}
