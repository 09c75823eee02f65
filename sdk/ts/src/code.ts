/**
 * Run code: cells in stateful Python, JavaScript and bash contexts of a
 * sandbox of the `code-interpreter` template (`/v1/sandboxes/{id}/code`,
 * docs/code-interpreter.md). A cell's output streams to the callbacks as
 * it is produced; the call resolves with the whole `Execution` once the
 * cell ends. A cell's own error (an exception, a timeout) is in
 * `execution.error`, not thrown: only a failed call throws.
 */
import { StreamEndedError } from "./errors.js";
import { type CallContext, type RequestOptions, type Transport, openContext, withContext } from "./http.js";
import { ndjson } from "./streams.js";
import type { CodeContext, CodeEventBody, CodeLanguage, RunCodeBody } from "./types.js";

export type { CodeContext, CodeLanguage };

/** One rich result of a cell: a MIME bundle, with accessors for the usual types. */
export class Result {
  /** The MIME bundle as sent (`text/plain`, `text/html`, `image/png` base64, …). */
  readonly data: Record<string, unknown>;
  /** The cell's last expression (true) versus `display()` output (false). */
  readonly isMainResult: boolean;

  /** @internal */
  constructor(data: Record<string, unknown>, isMainResult: boolean) {
    this.data = data;
    this.isMainResult = isMainResult;
  }

  #s(mime: string): string | undefined {
    const v = this.data[mime];
    return typeof v === "string" ? v : undefined;
  }

  get text() { return this.#s("text/plain"); }
  get html() { return this.#s("text/html"); }
  get markdown() { return this.#s("text/markdown"); }
  get svg() { return this.#s("image/svg+xml"); }
  get latex() { return this.#s("text/latex"); }
  /** `image/png`, base64 (decode with `bytes("image/png")`). */
  get png() { return this.#s("image/png"); }
  /** `image/jpeg`, base64. */
  get jpeg() { return this.#s("image/jpeg"); }
  /** `application/pdf`, base64. */
  get pdf() { return this.#s("application/pdf"); }
  get json() { return this.data["application/json"]; }

  /** The decoded bytes of a base64 MIME type (`image/png`, `image/jpeg`, `application/pdf`); undefined when absent. */
  bytes(mime: string): Uint8Array | undefined {
    const s = this.#s(mime);
    if (s === undefined) return undefined;
    const bin = atob(s);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  /** The MIME types this result has. */
  formats(): string[] {
    return Object.keys(this.data);
  }
}

/** The error a cell raised: `TimeoutError` for one interrupted at its timeout, `KernelDied` for one that killed its kernel. */
export interface ExecutionError {
  name: string;
  value: string;
  traceback: string;
}

/** How a cell ended. */
export interface Execution {
  results: Result[];
  logs: { stdout: string[]; stderr: string[] };
  /** The cell's own error, when it raised one. */
  error: ExecutionError | undefined;
  contextId: string;
  executionCount: number | undefined;
  /** `ok`, `error`, `timeout`, `interrupted` or `disconnected`. */
  status: string;
  durationMs: number;
  /** Why the cell ran in a fresh kernel (the context's last one died), when it did. */
  kernelRestarted: string | undefined;
  /** The main result's text/plain form. */
  readonly text: string | undefined;
}

export interface RunCodeOptions extends RequestOptions {
  /** `python` (default), `javascript` or `bash`: picks that language's default context when `contextId` is unset. */
  language?: CodeLanguage;
  /** A context from `codeContexts.create()` (or its `CodeContext`). */
  context?: string | CodeContext;
  /** Variables for this cell only, over the sandbox's current environment. */
  env?: Record<string, string>;
  /** Working directory for this cell only. */
  cwd?: string;
  /**
   * Interrupts the cell after this many milliseconds (`error.name` is then
   * `TimeoutError`) and keeps the context. Unlike `timeoutMs`, which
   * bounds the SDK call and throws, this is the cell's own limit.
   */
  cellTimeoutMs?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: Result) => void;
  onError?: (error: ExecutionError) => void;
}

/** Runs a cell; see SandboxHandle.runCode. */
export async function runCode(t: Transport, id: string, code: string, o: RunCodeOptions = {}): Promise<Execution> {
  const body: RunCodeBody = { code };
  if (o.language) body.language = o.language;
  if (o.context) body.context_id = typeof o.context === "string" ? o.context : o.context.id;
  if (o.env) body.env = o.env;
  if (o.cwd) body.cwd = o.cwd;
  if (o.cellTimeoutMs !== undefined) body.timeout_ms = Math.max(1, Math.ceil(o.cellTimeoutMs));
  const ctx = openContext(o);
  try {
    const res = await t.send({ method: "POST", path: `/v1/sandboxes/${encodeURIComponent(id)}/code`, json: body, accept: "application/x-ndjson" }, ctx);
    if (!res.body) throw new StreamEndedError({ code: "stream_ended", message: "the answer has no body" });
    const ex: Execution = {
      results: [],
      logs: { stdout: [], stderr: [] },
      error: undefined,
      contextId: "",
      executionCount: undefined,
      status: "",
      durationMs: 0,
      kernelRestarted: undefined,
      get text() {
        return this.results.find((r) => r.isMainResult)?.text;
      },
    };
    try {
      for await (const raw of ndjson(res.body)) {
        const ev = raw as CodeEventBody;
        switch (ev.type) {
          case "stdout":
            ex.logs.stdout.push(ev.text ?? "");
            o.onStdout?.(ev.text ?? "");
            break;
          case "stderr":
            ex.logs.stderr.push(ev.text ?? "");
            o.onStderr?.(ev.text ?? "");
            break;
          case "result": {
            const r = new Result(ev.data ?? {}, !!ev.is_main_result);
            ex.results.push(r);
            o.onResult?.(r);
            break;
          }
          case "error":
            ex.error = { name: ev.name ?? "", value: ev.value ?? "", traceback: ev.traceback ?? "" };
            o.onError?.(ex.error);
            break;
          case "kernel_restarted":
            ex.kernelRestarted = ev.reason ?? "";
            break;
          case "end":
            ex.contextId = ev.context_id ?? "";
            ex.executionCount = ev.execution_count ?? undefined;
            ex.status = ev.status ?? "";
            ex.durationMs = ev.duration_ms ?? 0;
            return ex;
          default:
          // Event types added later carry nothing this version needs.
        }
      }
    } catch (e) {
      if (e instanceof Error && e.name === "AbortError") throw e;
      throw new StreamEndedError({ code: "stream_ended", message: `the code stream broke before the cell ended: ${String(e)}`, cause: e });
    }
    throw new StreamEndedError({ code: "stream_ended", message: "the code stream ended without an end event" });
  } finally {
    ctx.dispose();
  }
}

/** The code contexts of one sandbox. Get it from `sandbox.codeContexts`. */
export class CodeContexts {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly id: string,
  ) {}

  private path(ctxId?: string, tail = ""): string {
    const base = `/v1/sandboxes/${encodeURIComponent(this.id)}/code/contexts`;
    return ctxId === undefined ? base : `${base}/${encodeURIComponent(ctxId)}${tail}`;
  }

  /** Starts a new context (a fresh kernel) whose state persists across cells. */
  async create(input: { language?: CodeLanguage; cwd?: string } = {}, opts?: RequestOptions): Promise<CodeContext> {
    return withContext(opts, async (ctx: CallContext) => (await this.t.json<CodeContext>({ method: "POST", path: this.path(), json: input }, ctx)).data);
  }

  /** The sandbox's contexts (default ones once used). */
  async list(opts?: RequestOptions): Promise<CodeContext[]> {
    return withContext(opts, async (ctx) => (await this.t.json<{ contexts?: CodeContext[] }>({ method: "GET", path: this.path() }, ctx)).data.contexts ?? []);
  }

  /** Replaces the context's kernel; its state is dropped. */
  async restart(context: string | CodeContext, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.send({ method: "POST", path: this.path(ctxId(context), "/restart") }, ctx).then((r) => r.body?.cancel()));
  }

  /** Interrupts the context's running cell (its state is kept); resolves whether one was running. */
  async interrupt(context: string | CodeContext, opts?: RequestOptions): Promise<boolean> {
    return withContext(opts, async (ctx) => {
      const { data } = await this.t.json<{ interrupted?: boolean }>({ method: "POST", path: this.path(ctxId(context), "/interrupt") }, ctx);
      return !!data.interrupted;
    });
  }

  /** Stops the context's kernel and forgets it. */
  async delete(context: string | CodeContext, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.send({ method: "DELETE", path: this.path(ctxId(context)) }, ctx).then((r) => r.body?.cancel()));
  }
}

function ctxId(c: string | CodeContext): string {
  return typeof c === "string" ? c : c.id;
}
