/**
 * `client.sandboxes` and the SandboxHandle it returns.
 *
 * Field names: the API's snake_case names (`ram_mb`, `parent_id`,
 * `auto_resume`, `template_version_id`) are canonical, in requests and on
 * records. The camelCase spellings of the `client.sandboxes` reference (`ttlMs`,
 * `templateVersionId`, `projectId`, `parentId`, `idempotencyKey`; on
 * records `orgId`, `expiresAt`, `destroyedReason`, …) are accepted and set
 * beside them, so code written in either style works.
 */
import { PlatinumError, SandboxStateError } from "./errors.js";
import { type CallContext, type RequestOptions, type Transport, sleep, withContext } from "./http.js";
import { type Command, type EventStream, type ExecOptions, type ExecResult, exec, execStream } from "./exec.js";
import { Artifacts, Files, Preview } from "./files.js";
import { Processes } from "./processes.js";
import { CodeContexts, type Execution, type RunCodeOptions, runCode } from "./code.js";
import type {
  CreateSandboxBody,
  EnvResult,
  NetworkPolicy,
  NetworkResult,
  PreviewURL,
  ResizeRequest,
  ResizeResult,
  Sandbox,
  SandboxMetrics,
  SandboxState,
  SandboxUsage,
  Snapshot,
} from "./types.js";

/** What a SandboxesApi needs from the client. */
export interface ClientCore {
  t: Transport;
  pollIntervalMs: number;
}

/** The create body: the API's fields (snake_case) plus the camelCase aliases. */
export type CreateSandboxInput = Partial<CreateSandboxBody> & {
  ttlMs?: number;
  templateVersionId?: string;
  projectId?: string;
  parentId?: string;
  idempotencyKey?: string;
};

/** Options of calls that can wait for a state. */
export interface WaitOptions extends RequestOptions {
  /**
   * How long the server waits in one request before answering 202
   * (default 60 s, at most 600 s). After a 202 the SDK keeps polling the
   * same sandbox until it gets there, the call's `timeoutMs` runs out or
   * `signal` aborts; it never repeats the call that started the change.
   */
  waitTimeoutMs?: number;
}

export interface CreateOptions extends WaitOptions {
  /** Resolve only once the sandbox is running (throws SandboxStateError if it fails instead). */
  waitForRunning?: boolean;
}

/** The list query. Filters combine. */
export interface ListSandboxesInput extends RequestOptions {
  state?: SandboxState;
  limit?: number;
  offset?: number;
  /** Only this sandbox's children. */
  parent_id?: string;
  parentId?: string;
  /** Only top-level sandboxes (no parent). */
  rootsOnly?: boolean;
  roots_only?: boolean;
  /** Ask for `total` (the count across pages), read from one database snapshot. */
  paginated?: boolean;
  /** Only sandboxes whose metadata has every pair. */
  metadata?: Record<string, string>;
  project_id?: string;
  projectId?: string;
  /** Bring back what lists leave out: `destroyed`, `failed`. */
  include?: string | string[];
}

/** One page of sandboxes, newest first: `rows` are the records as the API sent them, `data` the same as handles. */
export interface ListSandboxHandlesResponse {
  rows: Sandbox[];
  data: SandboxHandle[];
  /** Matching sandboxes across all pages (with `paginated: true`). */
  total?: number;
}

export interface ForkResult {
  sourceId: string;
  memory: boolean;
  memoryReason?: string;
  waitTimedOut: boolean;
  sandboxes: SandboxHandle[];
}

const waitMaxMs = 600_000;

function waitQuery(state: string | undefined, o: WaitOptions | undefined): Record<string, string | undefined> {
  if (!state) return {};
  const q: Record<string, string | undefined> = { wait_for_state: state };
  if (o?.waitTimeoutMs !== undefined) q["wait_timeout_ms"] = String(Math.max(1, Math.min(waitMaxMs, Math.ceil(o.waitTimeoutMs))));
  return q;
}

/** Moves camelCase aliases to their snake_case names; returns the body and its idempotency key. */
export function normalizeCreate(input: CreateSandboxInput): { body: Record<string, unknown>; key: string | undefined } {
  const body: Record<string, unknown> = { ...input };
  const pairs: [string, string][] = [
    ["ttlMs", "ttl_ms"],
    ["templateVersionId", "template_version_id"],
    ["projectId", "project_id"],
    ["parentId", "parent_id"],
  ];
  for (const [camel, snake] of pairs) {
    if (body[camel] === undefined) {
      delete body[camel];
      continue;
    }
    if (body[snake] !== undefined && body[snake] !== body[camel]) {
      throw new TypeError(`${camel} and ${snake} are one field under two spellings and differ; pass one`);
    }
    body[snake] = body[camel];
    delete body[camel];
  }
  const keys = [body["idempotencyKey"], body["idempotency_key"]].filter((k): k is string => typeof k === "string");
  delete body["idempotencyKey"];
  delete body["idempotency_key"];
  if (keys.length === 2 && keys[0] !== keys[1]) throw new TypeError("idempotencyKey and idempotency_key differ; pass one");
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return { body, key: keys[0] };
}

/** Whether a sandbox in state got can no longer reach want (for a plain wait). */
function hopeless(got: string, want: string): boolean {
  if (got === "failed") return want !== "failed";
  if (got === "deleting") return want !== "deleting" && want !== "deleted";
  if (got === "deleted") return want !== "deleted";
  return false;
}

/** When a wait after stop/start/archive/create is over. */
function goal(target: string): { reached(s: Sandbox): boolean; hopeless(s: Sandbox): boolean } {
  const reached = (s: Sandbox) => {
    if (s.state === target) return true;
    if (target === "stopped") {
      if (s.state === "archived") return true; // archived is stopped and more
      if ((s.state === "deleting" || s.state === "deleted") && s.type === "ephemeral" && s.deleted_reason === "auto_deleted") return true;
    }
    return false;
  };
  const settled = new Set(["running", "stopped", "archived", "failed", "deleting", "deleted"]);
  return { reached, hopeless: (s) => settled.has(s.state) && !reached(s) };
}

/** The sandbox calls. Get it from `client.sandboxes`. */
export class SandboxesApi {
  /** @internal */
  constructor(private readonly c: ClientCore) {}

  /** @internal */
  handle(rec: Sandbox): SandboxHandle {
    return new SandboxHandle(this.c, this, rec);
  }

  /**
   * Creates a sandbox and returns a handle to it. Without `waitForRunning`
   * it resolves as soon as the record exists (state `creating`); with it,
   * once the sandbox runs. Every create carries an idempotency key (yours,
   * from `idempotencyKey`, or a generated one), so the SDK's own retries and
   * a 202 from a wait that ran out never create a second sandbox.
   */
  async create(input: CreateSandboxInput = {}, opts?: CreateOptions): Promise<SandboxHandle> {
    const { body, key } = normalizeCreate(input);
    if (key && opts?.idempotencyKey && key !== opts.idempotencyKey) {
      throw new TypeError("the idempotency key in the body and in the options differ; pass one");
    }
    return withContext({ ...opts, idempotencyKey: opts?.idempotencyKey ?? key }, async (ctx) => {
      const q = waitQuery(opts?.waitForRunning ? "running" : undefined, opts);
      const rec = await this.call<Sandbox>(ctx, "POST", "/v1/sandboxes", body, q, "running");
      if (!opts?.waitForRunning || rec.state === "running") return this.handle(rec);
      // The server's wait ran out (202 wait_timed_out): poll this sandbox; never create again.
      return this.handle(await this.poll(ctx, rec.id, goal("running"), "running", false));
    });
  }

  /** The sandbox with this id, as a handle. Unknown, deleted and other orgs' sandboxes throw NotFoundError. */
  async get(sandboxId: string, opts?: RequestOptions): Promise<SandboxHandle> {
    return withContext(opts, async (ctx) => this.handle(await this.read(ctx, sandboxId, false)));
  }

  /** Checks the sandbox exists and returns a handle for further calls (it does not start a stopped one). */
  async connect(sandboxId: string, opts?: RequestOptions): Promise<SandboxHandle> {
    return this.get(sandboxId, opts);
  }

  /** One page of the org's live sandboxes, newest first (`rows` records, `data` handles). */
  async list(input: ListSandboxesInput = {}): Promise<ListSandboxHandlesResponse> {
    return withContext(input, async (ctx) => {
      const { data } = await this.c.t.json<{ rows?: Sandbox[]; total?: number }>({ method: "GET", path: "/v1/sandboxes", query: listQuery(input) }, ctx);
      const rows = data.rows ?? [];
      const out: ListSandboxHandlesResponse = { rows, data: rows.map((r) => this.handle(r)) };
      if (data.total !== undefined) out.total = data.total;
      return out;
    });
  }

  /**
   * Every matching sandbox, newest first, fetched page by page (`limit`,
   * default 100) as the loop consumes them. Pages are separate reads, so
   * sandboxes created or deleted meanwhile can shift between pages.
   * `signal` and `timeoutMs` apply to each page's request.
   */
  async *iterate(input: ListSandboxesInput = {}): AsyncGenerator<SandboxHandle> {
    const limit = Math.min(input.limit ?? 100, 200);
    let offset = input.offset ?? 0;
    for (;;) {
      const page = await this.list({ ...input, limit, offset });
      yield* page.data;
      if (page.rows.length < limit) return;
      offset += page.rows.length;
    }
  }

  /** The sandbox's children. */
  async children(sandboxId: string, opts?: RequestOptions): Promise<SandboxHandle[]> {
    return withContext(opts, async (ctx) => {
      const { data } = await this.c.t.json<{ rows?: Sandbox[] }>({ method: "GET", path: path(sandboxId, "/children") }, ctx);
      return (data.rows ?? []).map((r) => this.handle(r));
    });
  }

  /** Changes name (null clears it) or auto_resume. */
  async update(sandboxId: string, changes: { name?: string | null; auto_resume?: boolean; autoResume?: boolean }, opts?: RequestOptions): Promise<SandboxHandle> {
    const body: Record<string, unknown> = {};
    if (changes.name !== undefined) body["name"] = changes.name;
    const ar = changes.auto_resume ?? changes.autoResume;
    if (ar !== undefined) body["auto_resume"] = ar;
    return withContext(opts, async (ctx) => this.handle(await this.call<Sandbox>(ctx, "PATCH", path(sandboxId), body)));
  }

  /** Resets a live sandbox's TTL countdown to ttlMs from now (up to 24 hours in all) and returns the refreshed handle. */
  async setTtl(sandboxId: string, input: { ttlMs: number; idempotencyKey?: string }, opts?: RequestOptions): Promise<SandboxHandle> {
    const o = { ...opts, idempotencyKey: input.idempotencyKey ?? opts?.idempotencyKey };
    return withContext(o, async (ctx) => this.handle(await this.call<Sandbox>(ctx, "POST", path(sandboxId, "/ttl"), { ttl_ms: input.ttlMs })));
  }

  /** Destroys a sandbox; its handle has status `destroyed`, destroyedReason `user_killed`. Killing a destroyed one returns it again. */
  async kill(sandboxId: string, opts?: RequestOptions): Promise<SandboxHandle> {
    return withContext(opts, async (ctx) => this.handle(await this.call<Sandbox>(ctx, "POST", path(sandboxId, "/kill"))));
  }

  /** Starts deleting a sandbox (state `deleting`); children are never deleted, and live children make it a ConflictError. */
  async delete(sandboxId: string, opts?: RequestOptions): Promise<SandboxHandle> {
    return withContext(opts, async (ctx) => this.handle(await this.call<Sandbox>(ctx, "DELETE", path(sandboxId))));
  }

  /** Polls until the sandbox is in state (SandboxStateError if it settles elsewhere for good). */
  async waitForState(sandboxId: string, state: SandboxState, opts?: RequestOptions): Promise<SandboxHandle> {
    return withContext(opts, async (ctx) => {
      const g = { reached: (s: Sandbox) => s.state === state, hopeless: (s: Sandbox) => hopeless(s.state, state) };
      return this.handle(await this.poll(ctx, sandboxId, g, state, state === "deleted"));
    });
  }

  // ---- internals shared with SandboxHandle ----

  /** @internal A JSON call; a `sandbox_failed` answer becomes a SandboxStateError wanting want. */
  async call<T>(ctx: CallContext, method: "POST" | "PATCH" | "DELETE" | "GET" | "PUT", p: string, json?: unknown, query?: Record<string, string | undefined>, want?: string): Promise<T> {
    try {
      const call = json === undefined ? { method, path: p, query } : { method, path: p, query, json };
      return (await this.c.t.json<T>(call, ctx)).data;
    } catch (e) {
      if (e instanceof SandboxStateError && want) {
        throw new SandboxStateError({ code: e.code, status: e.status, message: e.message, body: e.body, want, got: e.got, ...(e.sandbox ? { sandbox: e.sandbox } : {}) });
      }
      throw e;
    }
  }

  /** @internal */
  async read(ctx: CallContext, id: string, includeDeleted: boolean): Promise<Sandbox> {
    return this.call<Sandbox>(ctx, "GET", path(id), undefined, includeDeleted ? { include_deleted: "true" } : undefined);
  }

  /** @internal Polls id until g is reached (returns it) or hopeless (SandboxStateError). */
  async poll(ctx: CallContext, id: string, g: { reached(s: Sandbox): boolean; hopeless(s: Sandbox): boolean }, want: string, includeDeleted = true): Promise<Sandbox> {
    for (;;) {
      const s = await this.read(ctx, id, includeDeleted);
      if (g.reached(s)) return s;
      if (g.hopeless(s)) {
        throw new SandboxStateError({
          code: "sandbox_state",
          message: `sandbox ${id} is ${s.state}, not ${want}${s.reason ? ": " + s.reason : ""}`,
          want,
          got: s.state,
          sandbox: s as unknown as Record<string, unknown>,
        });
      }
      await sleep(this.c.pollIntervalMs, ctx.signal);
    }
  }

  /** @internal stop/start/archive/restore with an optional wait for target. */
  async lifecycle(id: string, verb: string, target: string, wait: boolean, opts: WaitOptions | undefined, json?: unknown): Promise<Sandbox> {
    return withContext(opts, async (ctx) => {
      const rec = await this.call<Sandbox>(ctx, "POST", path(id, "/" + verb), json, waitQuery(wait ? target : undefined, opts), target);
      if (!wait) return rec;
      const g = goal(target);
      if (g.reached(rec)) return rec;
      if (g.hopeless(rec)) {
        throw new SandboxStateError({ code: "sandbox_state", message: `sandbox ${id} is ${rec.state}, not ${target}`, want: target, got: rec.state, sandbox: rec as unknown as Record<string, unknown> });
      }
      return this.poll(ctx, id, g, target);
    });
  }
}

function path(id: string, tail = ""): string {
  return `/v1/sandboxes/${encodeURIComponent(id)}${tail}`;
}

function listQuery(i: ListSandboxesInput): URLSearchParams {
  const q = new URLSearchParams();
  if (i.state) q.set("state", i.state);
  const parent = i.parent_id ?? i.parentId;
  const roots = i.rootsOnly ?? i.roots_only;
  if (parent && roots) throw new TypeError("list: pass parent_id or rootsOnly, not both");
  if (roots) q.set("parent_id", "none");
  else if (parent) q.set("parent_id", parent);
  if (i.limit !== undefined) q.set("limit", String(i.limit));
  if (i.offset) q.set("offset", String(i.offset));
  if (i.paginated !== undefined) q.set("paginated", String(i.paginated));
  const prj = i.project_id ?? i.projectId;
  if (prj) q.set("project_id", prj);
  if (i.include) q.set("include", Array.isArray(i.include) ? i.include.join(",") : i.include);
  for (const [k, v] of Object.entries(i.metadata ?? {})) q.set(`metadata[${k}]`, v);
  return q;
}

/** The wire fields a handle carries (all of the record but `restore` and `start`, which are methods there: see `restoreKind` and `startKind`). */
export type SandboxFields = Omit<Sandbox, "restore" | "start">;

/** Record keys that must not shadow a handle's methods and helpers. */
const reserved = new Set(Object.getOwnPropertyNames(Object.prototype));

/** The bound command helper: `sandbox.commands.run("python --version")`. */
export interface Commands {
  /** Runs a command (a shell string or an argv) and returns exitCode, stdout and stderr. */
  run(cmd: Command, opts?: ExecOptions): Promise<ExecResult>;
  /** Runs a command with its output streamed. */
  stream(cmd: Command, opts?: ExecOptions): Promise<EventStream>;
}

export interface SandboxHandle extends SandboxFields {}

/**
 * One sandbox: its record (every field of the API's Sandbox, snake_case,
 * plus the camelCase names beside them) and the calls that act on it.
 * Calls that return the sandbox refresh the handle's fields in place and
 * resolve to the handle itself; `refresh()` re-reads it.
 */
export class SandboxHandle {
  /** The record as last read from the API. */
  record!: Sandbox;
  /** camelCase names of the record's fields (the snake_case ones are canonical). */
  orgId: string | undefined;
  projectId: string | undefined;
  templateId: string | undefined;
  templateSlug: string | undefined;
  templateVersion: number | null | undefined;
  templateVersionId: string | undefined;
  ttlMs: number | null | undefined;
  expiresAt: string | null | undefined;
  destroyedAt: string | undefined;
  destroyedReason: string | undefined;
  parentId: string | null | undefined;
  autoResume: boolean | undefined;
  updatedAt: string | undefined;
  /** What the latest start brought back (`memory` or `disk_only`), while running after a start. */
  restoreKind: "memory" | "disk_only" | undefined;
  ramRestored: boolean | undefined;
  /** How the create got the sandbox running: `warm` (its template's warm pool booted it ahead) or `cold`. */
  startKind: "warm" | "cold" | undefined;

  /** Files in the sandbox. */
  readonly files: Files;
  /** Background processes: start with streamed output, connect, input, signal, PTY resize. */
  readonly processes: Processes;
  /** Preview URLs of the sandbox's ports. */
  readonly preview: Preview;
  /** Artifacts exported from the sandbox. */
  readonly artifacts: Artifacts;
  /** Commands: `commands.run("python --version")`. */
  readonly commands: Commands;
  /** Code contexts of the code interpreter (template `code-interpreter`). */
  readonly codeContexts: CodeContexts;

  readonly #c: ClientCore;
  readonly #api: SandboxesApi;

  /** @internal */
  constructor(c: ClientCore, api: SandboxesApi, rec: Sandbox) {
    this.#c = c;
    this.#api = api;
    this._apply(rec);
    this.files = new Files(c.t, rec.id);
    this.processes = new Processes(c.t, rec.id);
    this.preview = new Preview(c.t, rec.id);
    this.artifacts = new Artifacts(c.t, rec.id);
    this.codeContexts = new CodeContexts(c.t, rec.id);
    this.commands = {
      run: (cmd, opts) => this.exec(cmd, opts),
      stream: (cmd, opts) => this.execStream(cmd, opts),
    };
  }

  /** @internal Replaces the handle's fields with rec's. */
  _apply(rec: Sandbox): this {
    const self = this as unknown as Record<string, unknown>;
    const proto = Object.getPrototypeOf(this) as object;
    for (const [k, v] of Object.entries(rec)) {
      if (k === "restore" || reserved.has(k) || k in proto || k === "files" || k === "processes" || k === "preview" || k === "artifacts" || k === "commands" || k === "codeContexts" || k === "record") continue;
      self[k] = v;
    }
    this.record = rec;
    this.orgId = rec.org_id;
    this.projectId = rec.project_id;
    this.templateId = rec.template_id ?? rec.template;
    this.templateSlug = rec.template_slug ?? rec.template;
    this.templateVersion = rec.template_version;
    this.templateVersionId = rec.template_version_id ?? undefined;
    this.ttlMs = rec.ttl_ms;
    this.expiresAt = rec.expires_at;
    this.destroyedAt = rec.destroyed_at;
    this.destroyedReason = rec.destroyed_reason;
    this.parentId = rec.parent_id;
    this.autoResume = rec.auto_resume;
    this.updatedAt = rec.updated_at;
    if (rec.createdAt === undefined) self["createdAt"] = rec.created_at;
    this.restoreKind = rec.restore;
    this.ramRestored = rec.ram_restored;
    this.startKind = rec.start;
    return this;
  }

  /** Re-reads the record. */
  async refresh(opts?: RequestOptions): Promise<this> {
    return withContext(opts, async (ctx) => this._apply(await this.#api.read(ctx, this.id, true)));
  }

  /** Polls until the sandbox is in state. */
  async waitForState(state: SandboxState, opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.waitForState(this.id, state, opts)).record);
  }

  /**
   * Runs a command and returns its exit code and whole output (a non-zero
   * exit is not an error). With `onStdout`/`onStderr` the output is
   * streamed to them as it is produced instead (and not collected).
   */
  exec(cmd: Command, opts?: ExecOptions): Promise<ExecResult> {
    return exec(this.#c.t, this.id, cmd, opts);
  }

  /** Runs a command with its output streamed: iterate the stream for events, or `wait()` for the exit. */
  execStream(cmd: Command, opts?: ExecOptions): Promise<EventStream> {
    return execStream(this.#c.t, this.id, cmd, opts);
  }

  /**
   * Runs a cell in the sandbox's code interpreter (template
   * `code-interpreter`): `python` by default, in the language's default
   * context unless `context` names one. Output streams to the callbacks as
   * it is produced; the cell's own error is `execution.error`, not thrown.
   */
  runCode(code: string, opts?: RunCodeOptions): Promise<Execution> {
    return runCode(this.#c.t, this.id, code, opts);
  }

  /** Merges variables into the environment; a null value removes the key. New commands see the change at once. */
  async setEnv(changes: Record<string, string | null>, opts?: RequestOptions): Promise<EnvResult> {
    return withContext(opts, (ctx) => this.#api.call<EnvResult>(ctx, "PATCH", path(this.id, "/env"), { env: changes }));
  }

  /** Turns auto-resume (a preview request starts the stopped sandbox) on or off. */
  async setAutoResume(on: boolean, opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.update(this.id, { auto_resume: on }, opts)).record);
  }

  /** Renames the sandbox; null clears the name. */
  async rename(name: string | null, opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.update(this.id, { name }, opts)).record);
  }

  /** Stops the sandbox, keeping its disk (and memory where it can). `waitForStopped` resolves once stopped. */
  async stop(opts?: WaitOptions & { waitForStopped?: boolean }): Promise<this> {
    return this._apply(await this.#api.lifecycle(this.id, "stop", "stopped", !!opts?.waitForStopped, opts));
  }

  /** Starts a stopped or archived sandbox. `waitForRunning` resolves once running (see `restoreKind`, `ramRestored`). */
  async start(opts?: WaitOptions & { waitForRunning?: boolean }): Promise<this> {
    return this._apply(await this.#api.lifecycle(this.id, "start", "running", !!opts?.waitForRunning, opts));
  }

  /** Moves a stopped sandbox's disk to cold storage; `start` restores it. */
  async archive(opts?: WaitOptions & { waitForArchived?: boolean }): Promise<this> {
    return this._apply(await this.#api.lifecycle(this.id, "archive", "archived", !!opts?.waitForArchived, opts));
  }

  /** Starts deleting the sandbox (teardown finishes in the background). */
  async delete(opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.delete(this.id, opts)).record);
  }

  /** Destroys the sandbox (status `destroyed`, destroyedReason `user_killed`). */
  async kill(opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.kill(this.id, opts)).record);
  }

  /** Resets the TTL countdown to ttlMs from now. */
  async setTtl(input: { ttlMs: number; idempotencyKey?: string }, opts?: RequestOptions): Promise<this> {
    return this._apply((await this.#api.setTtl(this.id, input, opts)).record);
  }

  /**
   * Changes cpu, ram_mb or disk_gb. A running sandbox that cannot change
   * live throws NotResizableError, whose `hint` says what to do instead.
   */
  async resize(size: ResizeRequest, opts?: RequestOptions): Promise<ResizeResult> {
    return withContext(opts, (ctx) => this.#api.call<ResizeResult>(ctx, "POST", path(this.id, "/resize"), size));
  }

  /** Live CPU, memory, disk, network and process figures. */
  async metrics(opts?: RequestOptions): Promise<SandboxMetrics> {
    return withContext(opts, (ctx) => this.#api.call<SandboxMetrics>(ctx, "GET", path(this.id, "/metrics")));
  }

  /** Billed usage between from and to (ISO 8601 or Date; the server's defaults when unset). */
  async usage(range?: RequestOptions & { from?: string | Date; to?: string | Date }): Promise<SandboxUsage> {
    const iso = (d: string | Date | undefined) => (d instanceof Date ? d.toISOString() : d);
    return withContext(range, (ctx) => this.#api.call<SandboxUsage>(ctx, "GET", path(this.id, "/usage"), undefined, { from: iso(range?.from), to: iso(range?.to) }));
  }

  /** The sandbox's children. */
  children(opts?: RequestOptions): Promise<SandboxHandle[]> {
    return this.#api.children(this.id, opts);
  }

  /** Sets the outbound network policy; `applies` says whether it took effect now or at the next start. */
  async setNetwork(policy: NetworkPolicy, opts?: RequestOptions): Promise<NetworkResult> {
    const body = { ...policy, allow_out: policy.allow_out ?? [], deny_out: policy.deny_out ?? [] };
    return withContext(opts, (ctx) => this.#api.call<NetworkResult>(ctx, "PATCH", path(this.id, "/network"), body));
  }

  /** The preview URL of port (shorthand for `preview.url(port)`). */
  previewUrl(port: number, opts?: RequestOptions & { expiresInSeconds?: number }): Promise<PreviewURL> {
    return this.preview.url(port, opts);
  }

  /** Takes a snapshot (disk, and memory where the runtime can). */
  async snapshot(input: { name?: string; memory?: boolean } = {}, opts?: RequestOptions): Promise<Snapshot> {
    return withContext(opts, (ctx) => this.#api.call<Snapshot>(ctx, "POST", path(this.id, "/snapshots"), input));
  }

  /** The sandbox's snapshots. */
  async snapshots(opts?: RequestOptions): Promise<Snapshot[]> {
    return withContext(opts, async (ctx) => (await this.#api.call<{ rows?: Snapshot[] }>(ctx, "GET", path(this.id, "/snapshots"))).rows ?? []);
  }

  /** Restores the sandbox in place from one of its snapshots. */
  async restore(snapshotId: string, opts?: WaitOptions & { waitForRunning?: boolean }): Promise<this> {
    return this._apply(await this.#api.lifecycle(this.id, "restore", "running", !!opts?.waitForRunning, opts, { snapshot_id: snapshotId }));
  }

  /**
   * Forks the running sandbox into count copies (children of it unless
   * `parent: false`); `metadata` is set on every copy over the source's.
   */
  async fork(input: { count?: number; wait?: boolean; parent?: boolean; metadata?: Record<string, string> } = {}, opts?: RequestOptions): Promise<ForkResult> {
    const body: Record<string, unknown> = { count: input.count ?? 1 };
    if (input.wait !== undefined) body["wait"] = input.wait;
    if (input.parent === false) body["parent"] = false;
    if (input.metadata) body["metadata"] = input.metadata;
    return withContext(opts, async (ctx) => {
      const r = await this.#api.call<{ source_id: string; memory: boolean; memory_reason?: string; wait_timed_out?: boolean; sandboxes: Sandbox[] }>(ctx, "POST", path(this.id, "/fork"), body);
      const out: ForkResult = { sourceId: r.source_id, memory: r.memory, waitTimedOut: !!r.wait_timed_out, sandboxes: r.sandboxes.map((s) => this.#api.handle(s)) };
      if (r.memory_reason) out.memoryReason = r.memory_reason;
      return out;
    });
  }

  /** Starts an off-host backup; `wait` resolves once it is ready. */
  async backup(input: { name?: string; wait?: boolean } = {}, opts?: RequestOptions): Promise<Snapshot> {
    return withContext(opts, async (ctx) => {
      const body = input.name ? { name: input.name } : {};
      let snap = await this.#api.call<Snapshot>(ctx, "POST", path(this.id, "/backups"), body);
      while (input.wait && snap.state === "creating") {
        await sleep(this.#c.pollIntervalMs, ctx.signal);
        snap = await this.#api.call<Snapshot>(ctx, "GET", `/v1/snapshots/${encodeURIComponent(snap.id)}`);
      }
      if (input.wait && snap.state === "failed") {
        throw new PlatinumError({ code: "backup_failed", message: `backup ${snap.id} failed: ${snap.reason ?? "no reason given"}`, body: snap as unknown as Record<string, unknown> });
      }
      return snap;
    });
  }

  /** The sandbox's backups. */
  async backups(opts?: RequestOptions): Promise<Snapshot[]> {
    return withContext(opts, async (ctx) => (await this.#api.call<{ rows?: Snapshot[] }>(ctx, "GET", path(this.id, "/backups"))).rows ?? []);
  }

  /** The record as JSON (what the API sent). */
  toJSON(): Sandbox {
    return this.record;
  }
}
