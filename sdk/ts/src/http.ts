/**
 * The transport: one place that sends requests to ptd, so every call gets
 * the same auth, idempotency keys, retries, deadlines and error mapping.
 *
 * - Every mutating call (POST, PUT, PATCH, DELETE) carries an
 *   `Idempotency-Key`, the caller's or a generated one, and keeps it across
 *   its own retries, so a retried create never makes a second sandbox.
 * - Answers that say "try again" (429 other than `quota_exceeded`, 502, 503,
 *   504, 409 `idempotency_key_in_progress`) and network errors are retried
 *   with exponential backoff and jitter, waiting at least `Retry-After`,
 *   at most `maxRetries` times and never past the call's deadline. A
 *   streamed request body cannot be sent twice, so it is never retried.
 * - Every call takes `{ signal, timeoutMs }`: the timeout covers the whole
 *   call, waits and streamed bodies included.
 */
import { ConnectionError, PlatinumError, TimeoutError, errorFromResponse } from "./errors.js";
import { parseRetryAfter } from "./retryafter.js";

/** Options every call takes. */
export interface RequestOptions {
  /** Aborts the call (and any stream it returned). */
  signal?: AbortSignal;
  /** Deadline for the whole call in milliseconds, waits and streams included. */
  timeoutMs?: number;
  /**
   * Idempotency key of a mutating call (24-hour retry window). The SDK
   * generates one per call when unset; pass your own to make a retry of a
   * whole operation (after a crash, say) return the first result.
   */
  idempotencyKey?: string;
}

/** A call's context: its abort signal and deadline, shared by every request it makes. */
export interface CallContext {
  signal: AbortSignal;
  /** Epoch milliseconds after which the call fails, or undefined. */
  deadline: number | undefined;
  idempotencyKey: string | undefined;
}

/** The transport's settings (from {@link PlatinumOptions}). */
export interface TransportOptions {
  baseUrl: string;
  token: string;
  userAgent: string;
  maxRetries: number;
  retryBaseMs: number;
  retryMaxMs: number;
  fetch: typeof fetch;
}

export type Query = Record<string, string | number | boolean | undefined | null>;

/** A request body: JSON (`json`) or raw bytes (`body`). */
export type RawBody = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

export interface Call {
  method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  query?: Query | URLSearchParams;
  json?: unknown;
  body?: RawBody;
  contentType?: string;
  accept?: string;
}

/** Starts a call's context from its options. Dispose it when the call (and its stream) is done. */
export function openContext(opts: RequestOptions | undefined): CallContext & { dispose(): void } {
  const ac = new AbortController();
  let timer: ReturnType<typeof setTimeout> | undefined;
  let deadline: number | undefined;
  const outer = opts?.signal;
  const onAbort = () => ac.abort(outer?.reason);
  if (outer) {
    if (outer.aborted) ac.abort(outer.reason);
    else outer.addEventListener("abort", onAbort, { once: true });
  }
  if (opts?.timeoutMs !== undefined && opts.timeoutMs !== null) {
    if (!(opts.timeoutMs > 0)) throw new TypeError(`timeoutMs must be a positive number, not ${opts.timeoutMs}`);
    deadline = Date.now() + opts.timeoutMs;
    timer = setTimeout(
      () => ac.abort(new TimeoutError({ code: "timeout", message: `the call did not finish within timeoutMs ${opts.timeoutMs}` })),
      opts.timeoutMs,
    );
    // A pending deadline must not keep a finished program alive.
    (timer as { unref?: () => void }).unref?.();
  }
  return {
    signal: ac.signal,
    deadline,
    idempotencyKey: opts?.idempotencyKey,
    dispose() {
      if (timer) clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    },
  };
}

/** Runs fn in a fresh call context and disposes it afterwards. */
export async function withContext<T>(opts: RequestOptions | undefined, fn: (ctx: CallContext) => Promise<T>): Promise<T> {
  const ctx = openContext(opts);
  try {
    return await fn(ctx);
  } finally {
    ctx.dispose();
  }
}

/** The error an aborted call throws: the signal's reason when it is an Error (a TimeoutError for timeoutMs). */
export function abortError(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  const e = new Error(typeof r === "string" ? r : "the call was aborted");
  e.name = "AbortError";
  return e;
}

/** Sleeps ms, or rejects when signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(abortError(signal));
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(abortError(signal));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

let counter = 0;

/** A fresh random idempotency key (`ptk_` and 32 hex digits), as the SDK generates for every mutating call. */
export function newIdempotencyKey(): string {
  const b = new Uint8Array(16);
  const c = (globalThis as { crypto?: { getRandomValues?: (a: Uint8Array) => Uint8Array } }).crypto;
  if (c?.getRandomValues) c.getRandomValues(b);
  else {
    // Node 18 has no global WebCrypto: mix the clock, a counter and Math.random.
    const t = Date.now() ^ (++counter << 20);
    for (let i = 0; i < 16; i++) b[i] = (Math.random() * 256) ^ ((t >>> ((i % 4) * 8)) & 0xff);
  }
  return "ptk_" + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
}

/** The header names the SDK uses. */
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";
export const REPLAYED_HEADER = "Idempotent-Replayed";

const mutating = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** How long Retry-After asks to wait, in ms (seconds or an HTTP date), or undefined. */
export function retryAfterMs(h: string | null, now = Date.now()): number | undefined {
  return parseRetryAfter(h, now);
}

/**
 * The delay before retry number attempt (0-based): exponential from base,
 * capped, with "equal jitter" (half fixed, half random) so clients that
 * failed together do not retry together; never shorter than retryAfter.
 */
export function backoffMs(attempt: number, base: number, cap: number, retryAfter?: number, rand = Math.random): number {
  const exp = Math.min(cap, base * 2 ** attempt);
  const jittered = exp / 2 + rand() * (exp / 2);
  if (retryAfter === undefined) return Math.round(jittered);
  // Honour the server's ask, plus a little jitter so a crowd spreads out.
  return Math.round(retryAfter + rand() * Math.min(retryAfter * 0.1, 1000));
}

/** Whether an error answer is worth sending again unchanged. */
export function retryable(err: PlatinumError): boolean {
  switch (err.status) {
    case 429:
      return err.code !== "quota_exceeded"; // a quota does not clear by waiting a second
    case 502:
    case 503:
    case 504:
      return true;
    case 409:
      return err.code === "idempotency_key_in_progress";
  }
  return false;
}

/** Sends requests to one ptd. */
export class Transport {
  constructor(readonly o: TransportOptions) {}

  url(path: string, query?: Query | URLSearchParams): string {
    let u = this.o.baseUrl + path;
    const q = query instanceof URLSearchParams ? query : toSearch(query);
    const s = q.toString();
    if (s) u += "?" + s;
    return u;
  }

  /**
   * Sends call and returns the 2xx Response (its body unread). Error answers
   * throw the matching PlatinumError after any retries.
   */
  async send(call: Call, ctx: CallContext): Promise<Response> {
    const headers: Record<string, string> = {
      "User-Agent": this.o.userAgent,
      Accept: call.accept ?? "application/json",
    };
    if (this.o.token) headers["Authorization"] = "Bearer " + this.o.token;
    let body: BodyInit | undefined;
    let replayable = true;
    if (call.json !== undefined) {
      body = JSON.stringify(call.json);
      headers["Content-Type"] = "application/json";
    } else if (call.body !== undefined) {
      body = call.body as BodyInit;
      headers["Content-Type"] = call.contentType ?? "application/octet-stream";
      replayable = !(call.body instanceof ReadableStream);
    }
    if (mutating.has(call.method)) headers[IDEMPOTENCY_KEY_HEADER] = ctx.idempotencyKey ?? newIdempotencyKey();
    const url = this.url(call.path, call.query);
    const what = `${call.method} ${call.path}`;
    for (let attempt = 0; ; attempt++) {
      const init: RequestInit & { duplex?: "half" } = { method: call.method, headers, signal: ctx.signal };
      if (body !== undefined) {
        init.body = body;
        if (!replayable) {
          init.duplex = "half";
          // fetch sends a clone of the request unless its redirect mode is
          // "error", and cloning tees a stream body: the unread branch would
          // keep every chunk sent until the call ends, the whole upload. A
          // streamed body cannot follow a redirect anyway (it cannot be
          // sent twice).
          init.redirect = "error";
        }
      }
      let res: Response;
      try {
        res = await this.o.fetch(url, init);
      } catch (e) {
        if (ctx.signal.aborted) throw abortError(ctx.signal);
        const err = new ConnectionError({ code: "connection", message: `${what}: ${errMessage(e)}`, request: what, cause: e });
        if (!replayable || attempt >= this.o.maxRetries) throw err;
        await this.pause(attempt, undefined, ctx, err);
        continue;
      }
      if (res.ok) return res;
      const err = await errorFromResponse(res, what);
      if (!replayable || attempt >= this.o.maxRetries || !retryable(err)) throw err;
      const ra = err.retryAfterMs ?? numField(err.body, "retry_after_ms");
      await this.pause(attempt, ra, ctx, err);
    }
  }

  /** Waits before a retry, or throws err when the wait would pass the deadline. */
  private async pause(attempt: number, retryAfter: number | undefined, ctx: CallContext, err: Error): Promise<void> {
    const d = backoffMs(attempt, this.o.retryBaseMs, this.o.retryMaxMs, retryAfter);
    if (ctx.deadline !== undefined && Date.now() + d >= ctx.deadline) throw err;
    await sleep(d, ctx.signal);
  }

  /** Sends call and decodes its JSON answer (undefined for 204). */
  async json<T>(call: Call, ctx: CallContext): Promise<{ data: T; res: Response }> {
    const res = await this.send(call, ctx);
    if (res.status === 204) return { data: undefined as T, res };
    const text = await res.text();
    return { data: (text ? JSON.parse(text) : undefined) as T, res };
  }
}

function toSearch(q: Query | undefined): URLSearchParams {
  const s = new URLSearchParams();
  if (!q) return s;
  for (const [k, v] of Object.entries(q)) {
    if (v === undefined || v === null) continue;
    s.set(k, String(v));
  }
  return s;
}

function numField(o: Record<string, unknown>, k: string): number | undefined {
  const v = o[k];
  return typeof v === "number" ? v : undefined;
}

function errMessage(e: unknown): string {
  if (e instanceof Error) {
    const c = (e as { cause?: unknown }).cause;
    return c instanceof Error ? `${e.message}: ${c.message}` : e.message;
  }
  return String(e);
}
