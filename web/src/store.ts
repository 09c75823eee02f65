// The signed-in session's view of the org's sandboxes: records the API
// answered, kept current by the event stream (state_changed), and the
// stream's own status. Components subscribe with useStore().
import { useEffect, useState } from "preact/hooks";
import { ApiError, call, followEvents, sandboxPath, type Sandbox, type SandboxState } from "./api";

const sandboxes = new Map<string, Sandbox>();
const listeners = new Set<() => void>();
// How many state events each sandbox has had: an answer requested before
// an event arrived (an action's `stopping`, a refetch) is older than that
// event's state, so it must not overwrite it.
const eventCount = new Map<string, number>();
// Sandboxes the page has not seen yet: list views reload when one appears.
const appeared = new Set<() => void>();
// Every state change, for views whose membership depends on state.
const changed = new Set<(id: string, to: SandboxState) => void>();
let stopEvents: (() => void) | null = null;
let notifyQueued = false;

export const live = { connected: false };

function notify(): void {
  if (notifyQueued) return;
  notifyQueued = true;
  queueMicrotask(() => {
    notifyQueued = false;
    for (const l of listeners) l();
  });
}

/** Re-renders the calling component whenever the store changes. */
export function useStore(): void {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
}

/** Calls fn on every state change the stream reports. */
export function useStateEvents(fn: (id: string, to: SandboxState) => void): void {
  useEffect(() => {
    changed.add(fn);
    return () => void changed.delete(fn);
  }, [fn]);
}

/** Calls fn when a sandbox the store does not know changes state. */
export function useAppeared(fn: () => void): void {
  useEffect(() => {
    appeared.add(fn);
    return () => void appeared.delete(fn);
  }, [fn]);
}

export function getSandbox(id: string): Sandbox | undefined {
  return sandboxes.get(id);
}

/** A mark to pass to put(): how many events the sandbox had when asked. */
export function mark(id: string): number {
  return eventCount.get(id) ?? 0;
}

/**
 * Stores a record the API answered. If a state event arrived since `seen`
 * (from mark() before the request), the event's state is newer and stays.
 */
export function put(s: Sandbox, seen = mark(s.id)): Sandbox {
  const cur = sandboxes.get(s.id);
  if (cur && mark(s.id) !== seen) {
    Object.assign(cur, { ...s, state: cur.state });
  } else if (cur) {
    Object.assign(cur, s);
  } else {
    sandboxes.set(s.id, { ...s });
  }
  notify();
  return sandboxes.get(s.id)!;
}

export function putAll(rows: Sandbox[]): void {
  for (const s of rows) put(s);
}

/** Marks a sandbox as gone (its delete finished or it was not found). */
export function forget(id: string): void {
  const s = sandboxes.get(id);
  if (s) s.state = "deleted";
  notify();
}

/** Reads one sandbox again and stores it; a 404 marks it deleted. */
export async function refresh(id: string): Promise<Sandbox | undefined> {
  const seen = mark(id);
  try {
    const s = put(await call<Sandbox>("GET", `${sandboxPath(id)}?include_deleted=true`), seen);
    // An event overtook the answer: its other fields (status…) are older
    // than the state; read it again.
    if (mark(id) !== seen) refetchSoon(id);
    return s;
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) forget(id);
    else throw e;
  }
  return undefined;
}

// One refetch per sandbox at a time: events come in bursts (creating →
// running) and the record carries what the event does not (status,
// progress, restore, reason).
const refetching = new Map<string, ReturnType<typeof setTimeout>>();
function refetchSoon(id: string): void {
  if (refetching.has(id)) return;
  refetching.set(id, setTimeout(() => {
    refetching.delete(id);
    refresh(id).catch(() => {});
  }, 250));
}

/** Starts following the org's state changes (once per sign-in). */
export function startEvents(onUnauthorized: (e: ApiError) => void): void {
  stopEvents?.();
  const startedAt = Date.now();
  stopEvents = followEvents("type=state_changed", (ev) => {
    if (!ev.sandbox_id) return;
    const id = ev.sandbox_id;
    eventCount.set(id, mark(id) + 1);
    const to = ev.data["to"] as SandboxState | undefined;
    const s = sandboxes.get(id);
    if (to) for (const fn of changed) fn(id, to);
    if (s && to) {
      s.state = to;
      // The stream first replays retained events; only fresh ones are
      // worth a refetch (the list load already has the rest).
      if (to !== "deleted" && Date.parse(ev.created_at) > startedAt - 10_000) refetchSoon(id);
      notify();
    } else if (!s && to && to !== "deleted" && to !== "deleting") {
      for (const fn of appeared) fn();
    }
  }, (connected, err) => {
    live.connected = connected;
    notify();
    if (err?.status === 401) onUnauthorized(err);
  });
}

export function stopAll(): void {
  stopEvents?.();
  stopEvents = null;
  live.connected = false;
  sandboxes.clear();
  eventCount.clear();
  notify();
}

export function eventsRunning(): boolean {
  return stopEvents !== null;
}
