/**
 * Errors the SDK throws. Every error answer from ptd becomes a
 * {@link PlatinumError} subclass chosen by its stable `code`, so callers
 * branch with `instanceof NotFoundError` or `err.code === "not_found"`,
 * never by parsing messages (which may change). Structured fields of the
 * answer (`field`, `state`, `children`, the resize `hint`, quota `limit`…)
 * are properties of the error, and the whole decoded body is `err.body`.
 */
import { parseRetryAfter } from "./retryafter.js";

/** The stable error codes ptd sends (see the `Error` schema of the API reference). */
export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "no_space"
  | "sandbox_not_ready"
  | "unavailable"
  | "internal"
  | "env_too_large"
  | "env_var_too_large"
  | "sandbox_not_resizable"
  | "disk_grow_unsupported"
  | "quota_exceeded"
  | "idempotency_key_reused"
  | "idempotency_key_in_progress"
  | "sandbox_ttl_exceeded"
  | "sandbox_destroyed"
  | "sandbox_failed"
  | "capacity"
  | "timeout"
  | "connection"
  | (string & {});

/** Base class of every error the SDK throws for a failed call. */
export class PlatinumError extends Error {
  /** The stable code (`not_found`, `quota_exceeded`, …). */
  readonly code: ErrorCode;
  /** The HTTP status, or 0 when no answer arrived (timeouts, network errors). */
  readonly status: number;
  /** The request id, when the server (or a proxy in front of it) sent one. */
  readonly requestId: string | undefined;
  /** The request field the error is about (`invalid_request`, `not_found`). */
  readonly field: string | undefined;
  /** The decoded JSON error body (empty when the answer was not JSON). */
  readonly body: Record<string, unknown>;
  /** The HTTP method and path of the failed call, e.g. `POST /v1/sandboxes`. */
  readonly request: string | undefined;
  /**
   * How long the server asked to wait before calling again (its
   * `Retry-After`, in milliseconds), e.g. 5000 on a 503 `capacity`. The SDK
   * has already waited that long between its own retries.
   */
  readonly retryAfterMs: number | undefined;

  constructor(init: ErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status ?? 0;
    this.requestId = init.requestId;
    this.body = init.body ?? {};
    this.request = init.request;
    this.retryAfterMs = init.retryAfterMs;
    this.field = str(this.body, "field");
  }
}

/** What a {@link PlatinumError} is built from. */
export interface ErrorInit {
  code: ErrorCode;
  message: string;
  status?: number;
  requestId?: string;
  body?: Record<string, unknown>;
  request?: string;
  retryAfterMs?: number;
  cause?: unknown;
}

/** 400: the request is malformed or a field is out of range (`field` names it). Also `env_var_too_large`. */
export class InvalidRequestError extends PlatinumError {}

/** 400 `sandbox_ttl_exceeded`: the TTL asked for is over the plan's limit (`maxTtlMs`). */
export class TtlExceededError extends InvalidRequestError {
  get maxTtlMs(): number | undefined {
    return num(this.body, "max_ttl_ms");
  }
}

/** 401: the token is missing or unknown. */
export class AuthenticationError extends PlatinumError {}

/** 403: the token may not do this (e.g. an org token calling an admin route). */
export class ForbiddenError extends PlatinumError {}

/** 404: the sandbox (or other resource) does not exist, was deleted, or is another organization's. */
export class NotFoundError extends PlatinumError {}

/**
 * 409: the request conflicts with the resource's current state. `state`
 * names the sandbox's state when the answer says it; `children` the live
 * children that block deleting a parent. Also `idempotency_key_reused` and
 * `idempotency_key_in_progress`.
 */
export class ConflictError extends PlatinumError {
  get state(): string | undefined {
    return str(this.body, "state");
  }
  get children(): string[] {
    const c = this.body["children"];
    return Array.isArray(c) ? c.filter((x): x is string => typeof x === "string") : [];
  }
}

/** 409 `sandbox_not_ready`: the sandbox is not running (`state` says what it is); start it first. */
export class SandboxNotReadyError extends ConflictError {}

/** 409 `sandbox_destroyed`: the sandbox was killed or expired; it cannot be changed any more. */
export class SandboxDestroyedError extends ConflictError {}

/** The resize `hint`: what to do instead of a live resize. */
export interface ResizeHint {
  action: string;
  applies_at: string;
  steps: string[];
}

/** 409 `sandbox_not_resizable`: the running sandbox cannot change cpu or ram_mb live; follow `hint`. */
export class NotResizableError extends ConflictError {
  get hint(): ResizeHint | undefined {
    const h = this.body["hint"];
    return h && typeof h === "object" ? (h as ResizeHint) : undefined;
  }
  get liveResize(): { supported: boolean; reason: string } | undefined {
    const l = this.body["live_resize"];
    return l && typeof l === "object" ? (l as { supported: boolean; reason: string }) : undefined;
  }
}

/** 409 `disk_grow_unsupported`: the guest cannot grow its filesystem online; stop it, then resize. */
export class DiskGrowUnsupportedError extends ConflictError {}

/** 429 `quota_exceeded`: the org's (or the sandbox tree's) limit would be passed. */
export class QuotaExceededError extends PlatinumError {
  /** Which limit: `sandboxes`, `cpu` or `ram_mb`. */
  get limit(): string | undefined {
    return str(this.body, "limit");
  }
  get max(): number | undefined {
    return num(this.body, "max");
  }
  /** `org` or `tree`. */
  get scope(): string | undefined {
    return str(this.body, "scope");
  }
}

/** 429 without `quota_exceeded`: too many requests; the SDK already retried with backoff. */
export class RateLimitError extends PlatinumError {}

/** 413: the body is too large (`payload_too_large`, `env_too_large`, `artifact_too_large`). */
export class PayloadTooLargeError extends PlatinumError {}

/** 507 `no_space`: the sandbox's disk is full. */
export class NoSpaceError extends PlatinumError {}

/**
 * 503 `capacity`: the host could not admit the call now (`reason`, e.g.
 * `start_queue_full`). The SDK retried it after `Retry-After`; call again later.
 */
export class CapacityError extends PlatinumError {
  get reason(): string | undefined {
    return str(this.body, "reason");
  }
  get queuedMs(): number | undefined {
    return num(this.body, "queued_ms");
  }
}

/** 503 `unavailable` (and 502/504): the service cannot answer now. */
export class UnavailableError extends PlatinumError {}

/** 5xx `internal`: a server error; retry, and report it if it persists. */
export class InternalServerError extends PlatinumError {}

/**
 * A wait ended with the sandbox in a state from which the wanted one cannot
 * be reached (failed, deleted, or moved elsewhere by another call). Also the
 * server's `sandbox_failed`. `sandbox` is the record as last seen.
 */
export class SandboxStateError extends PlatinumError {
  readonly want: string;
  readonly got: string;
  readonly sandbox: Record<string, unknown> | undefined;
  constructor(init: ErrorInit & { want: string; got: string; sandbox?: Record<string, unknown> }) {
    super(init);
    this.want = init.want;
    this.got = init.got;
    this.sandbox = init.sandbox;
  }
}

/** The call's `timeoutMs` ran out (code `timeout`, status 0, or 504 from the server). */
export class TimeoutError extends PlatinumError {}

/** No answer arrived: the connection failed (code `connection`); `cause` has the network error. */
export class ConnectionError extends PlatinumError {}

/** A stream (exec, process) ended before its exit was reported. */
export class StreamEndedError extends PlatinumError {}

type ErrorClass = new (init: ErrorInit) => PlatinumError;

const byCode: Record<string, ErrorClass> = {
  invalid_request: InvalidRequestError,
  env_var_too_large: InvalidRequestError,
  sandbox_ttl_exceeded: TtlExceededError,
  unauthorized: AuthenticationError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  conflict: ConflictError,
  idempotency_key_reused: ConflictError,
  idempotency_key_in_progress: ConflictError,
  memory_snapshot_unsupported: ConflictError,
  sandbox_not_ready: SandboxNotReadyError,
  not_ready: SandboxNotReadyError,
  sandbox_destroyed: SandboxDestroyedError,
  sandbox_not_resizable: NotResizableError,
  disk_grow_unsupported: DiskGrowUnsupportedError,
  quota_exceeded: QuotaExceededError,
  payload_too_large: PayloadTooLargeError,
  env_too_large: PayloadTooLargeError,
  artifact_too_large: PayloadTooLargeError,
  no_space: NoSpaceError,
  capacity: CapacityError,
  unavailable: UnavailableError,
  internal: InternalServerError,
  timeout: TimeoutError,
};

/** The code ptd uses for a status, for answers without a JSON body (a proxy's page). */
export function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return "invalid_request";
    case 401:
      return "unauthorized";
    case 403:
      return "forbidden";
    case 404:
      return "not_found";
    case 409:
      return "conflict";
    case 413:
      return "payload_too_large";
    case 429:
      return "rate_limited";
    case 502:
    case 503:
      return "unavailable";
    case 504:
      return "timeout";
    case 507:
      return "no_space";
    default:
      return status >= 500 ? "internal" : `http_${status}`;
  }
}

/** Builds the error subclass for an error answer's code and status. */
export function makeError(init: ErrorInit): PlatinumError {
  if (init.code === "sandbox_failed") {
    const got = str(init.body ?? {}, "state") ?? "failed";
    return new SandboxStateError({ ...init, want: "running", got, sandbox: init.body });
  }
  let cls = byCode[init.code];
  if (!cls) {
    const s = init.status ?? 0;
    if (s === 400) cls = InvalidRequestError;
    else if (s === 401) cls = AuthenticationError;
    else if (s === 403) cls = ForbiddenError;
    else if (s === 404) cls = NotFoundError;
    else if (s === 409) cls = ConflictError;
    else if (s === 413) cls = PayloadTooLargeError;
    else if (s === 429) cls = RateLimitError;
    else if (s === 502 || s === 503) cls = UnavailableError;
    else if (s === 504) cls = TimeoutError;
    else if (s >= 500) cls = InternalServerError;
    else cls = PlatinumError;
  }
  return new cls(init);
}

/** Bound on how much of an error answer is read: errors are small, a misconfigured proxy may send anything. */
const maxErrorBody = 64 << 10;

/** Turns a non-2xx Response into the matching error, reading (a bounded part of) its body. */
export async function errorFromResponse(res: Response, request: string): Promise<PlatinumError> {
  let raw = "";
  try {
    raw = await readBounded(res, maxErrorBody);
  } catch {
    // The body could not be read; the status still says what happened.
  }
  let body: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(raw);
    if (parsed && typeof parsed === "object" && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    // Not JSON: keep the text as the message below.
  }
  const code = str(body, "code") ?? codeForStatus(res.status);
  let message = str(body, "error") ?? str(body, "message");
  if (!message) {
    const text = raw.trim();
    message = text ? (text.length > 200 ? text.slice(0, 200) + "…" : text) : res.statusText || `HTTP ${res.status}`;
  }
  const requestId =
    res.headers.get("x-request-id") ?? res.headers.get("request-id") ?? str(body, "request_id") ?? undefined;
  const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
  return makeError({
    code,
    status: res.status,
    message: `${message} (${code}, HTTP ${res.status}, ${request})`,
    body,
    request,
    ...(requestId ? { requestId } : {}),
    ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
  });
}


async function readBounded(res: Response, limit: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let out = "";
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    out += dec.decode(value, { stream: true });
    if (n >= limit) {
      await reader.cancel().catch(() => {});
      break;
    }
  }
  return out + dec.decode();
}

function str(o: Record<string, unknown>, k: string): string | undefined {
  const v = o[k];
  return typeof v === "string" ? v : undefined;
}

function num(o: Record<string, unknown>, k: string): number | undefined {
  const v = o[k];
  return typeof v === "number" ? v : undefined;
}
