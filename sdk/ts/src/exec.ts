/**
 * Commands: buffered exec, streamed exec and the event stream both streamed
 * exec and the processes API answer with (NDJSON `ExecEvent` lines). Output
 * is handed on line by line as it arrives; nothing is collected unless the
 * caller asks for the buffered form.
 */
import { PlatinumError, StreamEndedError, makeError } from "./errors.js";
import { type CallContext, type RequestOptions, type Transport, openContext, withContext } from "./http.js";
import { ndjson } from "./streams.js";
import type { ExecRequestBody, ExecResultBody } from "./types.js";

/** A command: an argv (run without a shell) or a string (run with `/bin/sh -c`). */
export type Command = string[] | string;

/** Callbacks that receive output as the sandbox produces it. */
export interface OutputCallbacks {
  onStdout?: (data: string) => void;
  onStderr?: (data: string) => void;
  /** A PTY's output (processes started with `pty`), as raw bytes. */
  onPty?: (data: Uint8Array) => void;
}

export interface ExecOptions extends RequestOptions, OutputCallbacks {
  /** Added to (and overriding) the sandbox's environment for this command. */
  env?: Record<string, string>;
  /** Working directory; the sandbox's default when unset. */
  cwd?: string;
  /** Fed to the command's standard input, which is then closed. */
  stdin?: string;
  /**
   * Kills the command after this many milliseconds (`timedOut` is then
   * true). Unlike `timeoutMs`, which bounds the SDK call, this is the
   * command's own limit, enforced in the sandbox.
   */
  commandTimeoutMs?: number;
}

/** How a command ended. `exitCode` is -1 when a signal killed it (a timeout included). */
export interface ExecResult {
  exitCode: number;
  /** The wire name of exitCode. */
  exit_code: number;
  /** The whole output (empty when it was streamed to onStdout/onStderr). */
  stdout: string;
  stderr: string;
  timedOut: boolean;
  /** How long the command ran, as measured in the sandbox (0 when streamed). */
  durationMs: number;
}

/** One event of a command's output stream. */
export type ExecEvent =
  | { type: "start"; pid: number }
  | { type: "stdout"; data: string }
  | { type: "stderr"; data: string }
  | { type: "pty"; data: Uint8Array }
  | { type: "exit"; exitCode: number; timedOut: boolean };

/** How a streamed command ended. */
export interface ExitInfo {
  exitCode: number;
  timedOut: boolean;
}

export function execBody(cmd: Command, o: ExecOptions | undefined): ExecRequestBody {
  if (Array.isArray(cmd) ? cmd.length === 0 : !cmd) throw new TypeError("exec: empty command");
  const b: ExecRequestBody = { cmd };
  if (o?.env) b.env = o.env;
  if (o?.cwd) b.cwd = o.cwd;
  if (o?.stdin !== undefined) b.stdin = o.stdin;
  if (o?.commandTimeoutMs !== undefined) b.timeout_ms = Math.max(1, Math.ceil(o.commandTimeoutMs));
  return b;
}

function result(w: ExecResultBody): ExecResult {
  return {
    exitCode: w.exit_code,
    exit_code: w.exit_code,
    stdout: w.stdout ?? "",
    stderr: w.stderr ?? "",
    timedOut: !!w.timed_out,
    durationMs: w.duration_ms ?? 0,
  };
}

function b64bytes(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/**
 * A live output stream: iterate it for events, or call wait() for the exit
 * (events then go to the callbacks only). It ends with the command's exit;
 * an `error` event throws the matching PlatinumError.
 */
export class EventStream implements AsyncIterable<ExecEvent> {
  /** The process id inside the sandbox, once the start event arrived. */
  pid: number | undefined;
  /** The exit, once it arrived. */
  exit: ExitInfo | undefined;
  #events: AsyncGenerator<Record<string, unknown>>;
  #queued: ExecEvent[] = [];
  #cb: OutputCallbacks;
  #done: () => void;
  #status: number;
  #iterating = false;

  /** @internal */
  constructor(body: ReadableStream<Uint8Array>, status: number, cb: OutputCallbacks, done: () => void) {
    this.#events = ndjson(body);
    this.#cb = cb;
    this.#done = done;
    this.#status = status;
  }

  /** @internal Reads events up to the start event, so pid is known. */
  async _readStart(): Promise<void> {
    while (this.pid === undefined && !this.exit) {
      const ev = await this.#next();
      if (!ev) return;
      this.#queued.push(ev);
      if (ev.type === "start") return;
    }
  }

  async #next(): Promise<ExecEvent | undefined> {
    for (;;) {
      let r: IteratorResult<Record<string, unknown>>;
      try {
        r = await this.#events.next();
      } catch (e) {
        this.#done();
        if (e instanceof PlatinumError || (e instanceof Error && e.name === "AbortError")) throw e;
        throw new StreamEndedError({ code: "stream_ended", message: `the output stream broke before the exit: ${String(e)}`, cause: e });
      }
      if (r.done) {
        this.#done();
        if (this.exit) return undefined;
        throw new StreamEndedError({ code: "stream_ended", message: "the output stream ended without an exit event" });
      }
      const w = r.value;
      switch (w["type"]) {
        case "start":
          this.pid = Number(w["pid"]);
          return { type: "start", pid: this.pid };
        case "stdout":
        case "stderr": {
          const data = String(w["data"] ?? "");
          if (w["type"] === "stdout") this.#cb.onStdout?.(data);
          else this.#cb.onStderr?.(data);
          return { type: w["type"], data };
        }
        case "pty": {
          const data = typeof w["data_b64"] === "string" ? b64bytes(w["data_b64"]) : new TextEncoder().encode(String(w["data"] ?? ""));
          this.#cb.onPty?.(data);
          return { type: "pty", data };
        }
        case "exit":
          this.exit = { exitCode: Number(w["exit_code"]), timedOut: !!w["timed_out"] };
          await this.#events.return(undefined);
          this.#done();
          return { type: "exit", ...this.exit };
        case "error":
          await this.#events.return(undefined);
          this.#done();
          throw makeError({
            code: typeof w["code"] === "string" ? w["code"] : "internal",
            status: this.#status,
            message: String(w["error"] ?? "the stream reported an error"),
            body: w,
          });
        default:
        // Event types added later carry nothing this version needs.
      }
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ExecEvent> {
    if (this.#iterating) throw new Error("this stream is already being read");
    this.#iterating = true;
    try {
      for (;;) {
        const ev = this.#queued.shift() ?? (this.exit ? undefined : await this.#next());
        if (!ev) return;
        yield ev;
        if (ev.type === "exit") return;
      }
    } finally {
      if (!this.exit) await this.close();
    }
  }

  /** Reads the stream to its end (output goes to the callbacks) and returns the exit. */
  async wait(): Promise<ExitInfo> {
    for await (const _ of this) {
      // Callbacks already saw the output.
    }
    if (!this.exit) throw new StreamEndedError({ code: "stream_ended", message: "the output stream ended without an exit event" });
    return this.exit;
  }

  /** Stops reading. For exec this ends the command; a process keeps running. */
  async close(): Promise<void> {
    await this.#events.return(undefined);
    this.#done();
  }
}

/** Opens an NDJSON event stream with call; the call's context lives until the stream ends. */
export async function openStream(
  t: Transport,
  call: Parameters<Transport["send"]>[0],
  opts: RequestOptions | undefined,
  cb: OutputCallbacks,
): Promise<EventStream> {
  const ctx = openContext(opts);
  try {
    const res = await t.send({ ...call, accept: "application/x-ndjson" }, ctx);
    if (!res.body) throw new StreamEndedError({ code: "stream_ended", message: "the answer has no body" });
    return new EventStream(res.body, res.status, cb, () => ctx.dispose());
  } catch (e) {
    ctx.dispose();
    throw e;
  }
}

/** Runs cmd; see SandboxHandle.exec. */
export async function exec(t: Transport, id: string, cmd: Command, opts: ExecOptions | undefined): Promise<ExecResult> {
  const body = execBody(cmd, opts);
  const path = `/v1/sandboxes/${encodeURIComponent(id)}/exec`;
  if (opts?.onStdout || opts?.onStderr) {
    const s = await execStream(t, id, cmd, opts);
    const exit = await s.wait();
    return { exitCode: exit.exitCode, exit_code: exit.exitCode, stdout: "", stderr: "", timedOut: exit.timedOut, durationMs: 0 };
  }
  return withContext(opts, async (ctx: CallContext) => {
    const { data } = await t.json<ExecResultBody>({ method: "POST", path, json: body }, ctx);
    return result(data);
  });
}

/** Runs cmd with its output streamed; see SandboxHandle.execStream. */
export async function execStream(t: Transport, id: string, cmd: Command, opts: ExecOptions | undefined): Promise<EventStream> {
  const body = execBody(cmd, opts);
  const call = { method: "POST" as const, path: `/v1/sandboxes/${encodeURIComponent(id)}/exec`, query: { stream: "true" }, json: body };
  return openStream(t, call, opts, opts ?? {});
}
