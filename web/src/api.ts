// The dashboard's client of ptd's /v1 API (api/openapi.yaml). The token
// lives in sessionStorage and travels only as an Authorization header,
// never in a URL.

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
  ) {
    super(message);
  }
  /** How the dashboard shows it: the API's message, then its code. */
  describe(): string {
    return `${this.message} (${this.code})`;
  }
}

export type SandboxState =
  | "creating" | "starting" | "running" | "stopping" | "stopped" | "archiving"
  | "archived" | "restoring" | "deleting" | "deleted" | "failed";

export const states: SandboxState[] = [
  "creating", "starting", "running", "stopping", "stopped", "archiving",
  "archived", "restoring", "deleting", "failed",
];

export interface Sandbox {
  id: string;
  name: string | null;
  state: SandboxState;
  template: string;
  cpu: number;
  ram_mb: number;
  disk_gb: number;
  env_keys: string[];
  metadata: Record<string, string>;
  parent_id: string | null;
  runtime?: string;
  reason?: string;
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
  net_rx_bytes?: number;
  net_tx_bytes?: number;
  pids?: number;
  at: string;
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
    const body = JSON.parse(text) as { code?: string; error?: string };
    if (body && typeof body.error === "string") {
      return new ApiError(resp.status, body.code ?? String(resp.status), body.error);
    }
  } catch {
    // not JSON: fall through
  }
  return new ApiError(resp.status, `http_${resp.status}`, text.trim() || resp.statusText);
}

/** Sends one request and returns the raw response when it is a 2xx. */
export async function raw(method: string, path: string, body?: BodyInit, contentType?: string): Promise<Response> {
  let resp: Response;
  try {
    resp = await fetch(path, {
      method,
      body,
      headers: headers(contentType ? { "Content-Type": contentType } : undefined),
      cache: "no-store",
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

/**
 * Follows GET /v1/events as Server-Sent Events over fetch (EventSource
 * cannot send an Authorization header), reconnecting with ?after= the last
 * ID seen. Returns a function that ends it.
 */
export function followEvents(
  types: string,
  onEvent: (e: Event) => void,
  onStatus: (connected: boolean, err?: ApiError) => void,
): () => void {
  const ctl = new AbortController();
  let after = 0;
  const run = async () => {
    while (!ctl.signal.aborted) {
      try {
        const resp = await fetch(`/v1/events?type=${encodeURIComponent(types)}&after=${after}`, {
          headers: headers({ Accept: "text/event-stream" }),
          signal: ctl.signal,
          cache: "no-store",
        });
        if (!resp.ok || !resp.body) {
          const err = await toError(resp);
          onStatus(false, err);
          if (resp.status === 401 || resp.status === 403) return;
        } else {
          onStatus(true);
          const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value;
            let i: number;
            while ((i = buf.indexOf("\n\n")) >= 0) {
              const msg = buf.slice(0, i);
              buf = buf.slice(i + 2);
              const data = msg.split("\n").filter((l) => l.startsWith("data:"))
                .map((l) => l.slice(5).trimStart()).join("\n");
              if (!data) continue;
              const ev = JSON.parse(data) as Event;
              after = Math.max(after, ev.id);
              onEvent(ev);
            }
          }
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
