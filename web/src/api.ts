// The dashboard's client of ptd's /v1 API (api/openapi.yaml). The token
// lives in sessionStorage and travels only as an Authorization header (or,
// for the terminal's WebSocket, as its bearer subprotocol), never in a URL.

const tokenKey = "pt.token";

export function getToken(): string | null {
  return sessionStorage.getItem(tokenKey);
}

export function setToken(tok: string | null): void {
  if (tok === null) sessionStorage.removeItem(tokenKey);
  else sessionStorage.setItem(tokenKey, tok);
}

/** An error answer of the API: its stable code and human message. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly body: Record<string, unknown> = {},
  ) {
    super(message);
  }
  /** How the dashboard shows it: the API's message, then its code. */
  describe(): string {
    return `${this.message} (${this.code})`;
  }
}

/** How the dashboard shows any error: API errors with their code. */
export function describe(e: unknown): string {
  return e instanceof ApiError ? e.describe() : e instanceof Error ? e.message : String(e);
}

export type SandboxState =
  | "creating" | "starting" | "running" | "stopping" | "stopped" | "archiving"
  | "archived" | "restoring" | "deleting" | "deleted" | "failed";

export const states: SandboxState[] = [
  "creating", "starting", "running", "stopping", "stopped", "archiving",
  "archived", "restoring", "deleting", "failed",
];

/** States a sandbox passes through on its way somewhere else. */
export const transitional = new Set<SandboxState>(
  ["creating", "starting", "stopping", "archiving", "restoring", "deleting"]);

export interface NetworkPolicy {
  egress?: "allow" | "deny";
  allow_out?: string[];
  deny_out?: string[];
}

export interface Sandbox {
  id: string;
  name: string | null;
  state: SandboxState;
  status?: string;
  template: string;
  template_version_id: string | null;
  template_version?: number | null;
  cpu: number;
  ram_mb: number;
  disk_gb: number;
  env_keys: string[];
  metadata: Record<string, string>;
  parent_id: string | null;
  project_id?: string;
  runtime?: string;
  network?: NetworkPolicy;
  progress?: { op: string; done_bytes: number; total_bytes: number };
  auto_resume: boolean;
  ssh_key_fingerprints?: string[];
  reason?: string;
  type: string;
  auto_stop_minutes: number;
  auto_archive_days: number;
  auto_delete_days: number;
  expires_at: string | null;
  ttl_ms?: number | null;
  restore?: "memory" | "disk_only";
  source_snapshot_id?: string;
  created_at: string;
  updated_at: string;
}

export interface FileEntry {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink";
  size: number;
  mode: string;
  modified_at: string;
}

export interface Metrics {
  cpu_percent: number;
  memory_used_bytes: number;
  memory_limit_bytes: number;
  disk_used_bytes: number;
  disk_size_bytes: number;
  net_rx_bytes: number;
  net_tx_bytes: number;
  pids: number;
  at: string;
}

export interface Usage {
  id: string;
  from: string;
  to: string;
  cpu_seconds: number;
  ram_gb_seconds: number;
  storage_gb_hours: number;
}

export interface Snapshot {
  id: string;
  kind: "snapshot" | "backup";
  sandbox_id: string;
  name: string | null;
  state: "creating" | "ready" | "failed";
  memory: boolean;
  size_bytes: number;
  reason?: string;
  created_at: string;
}

export interface ForkResult {
  source_id: string;
  memory: boolean;
  memory_reason?: string;
  sandboxes: Sandbox[];
}

export interface ResizeResult {
  id: string;
  state: SandboxState;
  cpu: number;
  ram_mb: number;
  disk_gb: number;
  applies_at: "now" | "next_start" | "pending";
  partial: boolean;
}

export interface PreviewURL {
  sandbox_id: string;
  port: number;
  url: string;
  path_url: string;
  browser_url: string;
  token: string;
  public: boolean;
  expires_at: string | null;
}

export interface Template {
  slug: string;
  version_id: string | null;
  status: "ready" | "building" | "failed" | "not_built";
  progress?: string;
  size_bytes?: number;
  error?: string;
  created_at: string | null;
  version?: number | null;
  default?: boolean;
}

export interface TemplateVersion {
  id: string;
  slug: string;
  version: number;
  status: "building" | "ready" | "failed";
  progress?: string;
  size_bytes: number;
  error?: string;
  /** The build that made an org template's version (its log: followBuildLog). */
  build_id?: string;
  created_at: string;
  updated_at: string;
}

/** One line of a template build's log (GET …/builds/{id}/logs). */
export interface BuildLogLine {
  seq: number;
  time: string;
  type: "step" | "cache" | "output" | "pull" | "info" | "error" | "done";
  step?: number;
  steps?: number;
  line?: number;
  instruction?: string;
  cached?: boolean;
  duration_ms?: number;
  stream?: "stdout" | "stderr";
  text?: string;
  layer?: string;
  bytes?: number;
  total?: number;
  exit_code?: number;
  status?: string;
  version_id?: string;
}

export interface Project {
  id: string;
  org_id: string;
  name: string;
  default: boolean;
}

export interface OrgQuota {
  org_id: string;
  limits: { max_sandboxes?: number; max_cpu?: number; max_ram_mb?: number };
  usage: { sandboxes?: number; cpu?: number; ram_mb?: number };
}

export interface RuntimeClass {
  name: string;
  live_resize?: boolean;
}

export interface Host {
  id: string;
  runtime_classes?: RuntimeClass[];
}

export interface Event {
  id: number;
  type: string;
  sandbox_id?: string;
  data: Record<string, unknown>;
  created_at: string;
}

function headers(extra?: Record<string, string>): Headers {
  const h = new Headers(extra);
  const tok = getToken();
  if (tok) h.set("Authorization", `Bearer ${tok}`);
  return h;
}

async function toError(resp: Response): Promise<ApiError> {
  const text = await resp.text();
  try {
    const body = JSON.parse(text) as Record<string, unknown>;
    if (body && typeof body.error === "string") {
      return new ApiError(resp.status, typeof body.code === "string" ? body.code : String(resp.status), body.error, body);
    }
  } catch {
    // not JSON: fall through
  }
  return new ApiError(resp.status, `http_${resp.status}`, text.trim() || resp.statusText);
}

/**
 * Sends one request and returns the raw response when it is a 2xx. A GET
 * that fails on the network is sent once more after a short pause: a
 * browser drops requests in flight when the machine's network changes (a
 * laptop's Wi-Fi, or a sandbox's interface appearing on the host the browser
 * runs on), and a read is safe to repeat. Writes are never repeated.
 */
export async function raw(method: string, path: string, body?: BodyInit, contentType?: string): Promise<Response> {
  const send = () => fetch(path, {
    method,
    body,
    headers: headers(contentType ? { "Content-Type": contentType } : undefined),
    cache: "no-store",
  });
  let resp: Response;
  try {
    resp = await send().catch(async (e: unknown) => {
      if (method !== "GET") throw e;
      await new Promise((r) => setTimeout(r, 250));
      return send();
    });
  } catch (e) {
    throw new ApiError(0, "network_error", `ptd cannot be reached: ${(e as Error).message}`);
  }
  if (!resp.ok) throw await toError(resp);
  return resp;
}

/** Sends one JSON request and decodes the JSON answer (undefined for 204). */
export async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const resp = await raw(method, path, body === undefined ? undefined : JSON.stringify(body),
    body === undefined ? undefined : "application/json");
  if (resp.status === 204) return undefined as T;
  return (await resp.json()) as T;
}

export const sandboxPath = (id: string) => `/v1/sandboxes/${encodeURIComponent(id)}`;
export const filesPath = (id: string, path: string) =>
  `${sandboxPath(id)}/files?path=${encodeURIComponent(path)}`;

/** The PTY WebSocket of a sandbox, authenticated by subprotocol (docs/terminal.md). */
export function ptySocket(id: string): WebSocket {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const protos = ["platinum.pty.v1"];
  const tok = getToken();
  if (tok) protos.push(`bearer.${tok}`);
  return new WebSocket(`${scheme}//${location.host}${sandboxPath(id)}/pty`, protos);
}

/**
 * Reads a streamed answer to its end as text, calling onRecord with each
 * record that ends in sep: "\n" for NDJSON lines, "\n\n" for Server-Sent
 * Events messages. A last record without its sep is never complete, so it
 * is dropped.
 */
async function readRecords(body: ReadableStream<Uint8Array>, sep: string, onRecord: (r: string) => void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let i: number;
    while ((i = buf.indexOf(sep)) >= 0) {
      const r = buf.slice(0, i);
      buf = buf.slice(i + sep.length);
      onRecord(r);
    }
  }
}

/**
 * Reads a template build's log as NDJSON, following it while the build runs
 * (follow=true ends the answer when the build does). Returns a function
 * that stops reading.
 */
export function followBuildLog(
  slug: string,
  buildId: string,
  onLine: (l: BuildLogLine) => void,
  onError: (err: ApiError) => void,
): () => void {
  const ctl = new AbortController();
  const run = async () => {
    const resp = await fetch(`/v1/templates/${encodeURIComponent(slug)}/builds/${encodeURIComponent(buildId)}/logs?follow=true`, {
      headers: headers({ Accept: "application/x-ndjson" }),
      signal: ctl.signal,
      cache: "no-store",
    });
    if (!resp.ok || !resp.body) throw await toError(resp);
    await readRecords(resp.body, "\n", (r) => {
      const l = r.trim();
      if (l) onLine(JSON.parse(l) as BuildLogLine);
    });
  };
  run().catch((e: unknown) => {
    if (ctl.signal.aborted) return;
    onError(e instanceof ApiError ? e : new ApiError(0, "network_error", `build log: ${(e as Error).message}`));
  });
  return () => ctl.abort();
}

/**
 * Follows GET /v1/events as Server-Sent Events over fetch (EventSource
 * cannot send an Authorization header), reconnecting with ?after= the last
 * ID seen. `query` narrows it (e.g. `type=state_changed`). Returns a
 * function that ends it.
 */
export function followEvents(
  query: string,
  onEvent: (e: Event) => void,
  onStatus: (connected: boolean, err?: ApiError) => void,
): () => void {
  const ctl = new AbortController();
  let after = 0;
  const run = async () => {
    while (!ctl.signal.aborted) {
      try {
        const resp = await fetch(`/v1/events?${query}&after=${after}`, {
          headers: headers({ Accept: "text/event-stream" }),
          signal: ctl.signal,
          cache: "no-store",
        });
        if (!resp.ok || !resp.body) {
          const err = await toError(resp);
          onStatus(false, err);
          if (resp.status === 401 || resp.status === 403) return;
          if (resp.status === 410 && typeof err.body.pruned_through === "number") after = err.body.pruned_through;
        } else {
          onStatus(true);
          await readRecords(resp.body, "\n\n", (msg) => {
            const data = msg.split("\n").filter((l) => l.startsWith("data:"))
              .map((l) => l.slice(5).trimStart()).join("\n");
            if (!data) return;
            const ev = JSON.parse(data) as Event;
            after = Math.max(after, ev.id);
            onEvent(ev);
          });
          onStatus(false);
        }
      } catch (e) {
        if (ctl.signal.aborted) return;
        onStatus(false, new ApiError(0, "network_error", `event stream: ${(e as Error).message}`));
      }
      await new Promise((r) => setTimeout(r, 2000));
    }
  };
  void run();
  return () => ctl.abort();
}
