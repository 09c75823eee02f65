// A start refused by ptd's start admission queue, end to end. This suite
// runs against a ptd of its own whose host starts one sandbox at a time and
// queues none (tests/sdk/ts TestStartAdmission: --start-admission-slots 1
// --start-admission-slots-saturated 1 --start-admission-max-queue 0), so a
// start that arrives while another is in flight is answered 503 capacity,
// reason start_queue_full, Retry-After: 5, the sandbox left stopped.
//
// The slot is held by the start of an archived sandbox: it restores the
// disk from the object store and cold boots, which takes a second or more,
// while the calls under test reach ptd a few milliseconds after it began.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { CapacityError, Platinum, type SandboxHandle } from "@platinum-dev/sdk";
import { cleanup, freshOrg, running, url } from "./helpers.mjs";

interface Sent {
  method: string;
  path: string;
  key: string | null;
  at: number;
  status: number;
  code: string | undefined;
  retryAfter: string | null;
}

/** A fetch that records each request's method, path, key and send time, and the answer's status, code and Retry-After. */
function recordingFetch(): { f: typeof fetch; log: Sent[] } {
  const log: Sent[] = [];
  const f: typeof fetch = async (input, init) => {
    const at = Date.now();
    const res = await fetch(input, init);
    let code: string | undefined;
    if (!res.ok) code = ((await res.clone().json()) as { code?: string }).code;
    const u = new URL(String(input));
    log.push({ method: init?.method ?? "GET", path: u.pathname, key: new Headers(init?.headers).get("idempotency-key"), at, status: res.status, code, retryAfter: res.headers.get("retry-after") });
    return res;
  };
  return { f, log };
}

let client: Platinum;
let token: string;
before(async () => {
  ({ client, token } = await freshOrg("ts-admission"));
});
after(async () => {
  await cleanup(client);
});

/** A stopped-and-archived sandbox: starting it restores its disk, holding the host's one start slot meanwhile. */
async function archived(): Promise<SandboxHandle> {
  const s = await running(client);
  await s.stop({ waitForStopped: true });
  await s.archive({ waitForArchived: true, timeoutMs: 300_000 });
  assert.equal(s.state, "archived");
  return s;
}

test("a start refused with 503 capacity is retried after Retry-After with the same key and succeeds once the slot frees", async () => {
  const holder = await archived();
  const target = await running(client);
  await target.stop({ waitForStopped: true });

  const noRetry = new Platinum({ url, token, maxRetries: 0 });
  const { f, log } = recordingFetch();
  const retrying = new Platinum({ url, token, fetch: f });
  const [once, again] = await Promise.all([noRetry.sandboxes.get(target.id), retrying.sandboxes.get(target.id)]);

  // The holder's start returns at once (state restoring) and keeps the
  // host's only start slot until its restore and boot are done.
  await holder.start();
  assert.equal(holder.state, "restoring");

  // Both starts reach ptd while the slot is held. Without retries the
  // refusal reaches the caller, typed; with the default retries the SDK
  // waits Retry-After and sends the same start again until the slot is free.
  const t0 = Date.now();
  const retried = again.start({ waitForRunning: true });
  const err = await once.start({ waitForRunning: true }).catch((e: unknown) => e);
  assert.ok(err instanceof CapacityError, String(err));
  assert.equal(err.code, "capacity");
  assert.equal(err.status, 503);
  assert.equal(err.reason, "start_queue_full");
  assert.equal(err.retryAfterMs, 5000);
  assert.equal((await client.sandboxes.get(target.id)).state, "stopped", "a refused start leaves the sandbox stopped");

  await retried;
  assert.equal(again.state, "running");
  const starts = log.filter((r) => r.method === "POST" && r.path === `/v1/sandboxes/${target.id}/start`);
  assert.ok(starts.length >= 2, `the start was sent ${starts.length} time(s)`);
  const first = starts[0]!;
  const last = starts[starts.length - 1]!;
  assert.deepEqual([first.status, first.code, first.retryAfter], [503, "capacity", "5"], "ptd refused the first start");
  assert.equal(last.status, 200, "the last attempt was admitted");
  assert.ok(starts.slice(0, -1).every((r) => r.status === 503 && r.code === "capacity"), "only capacity refusals were retried");
  assert.ok(first.key && starts.every((r) => r.key === first.key), "every attempt carries the first one's idempotency key");
  for (let i = 1; i < starts.length; i++) {
    const gap = starts[i]!.at - starts[i - 1]!.at;
    // Retry-After: 5 plus the SDK's jitter (at most 10 % of it).
    assert.ok(gap >= 5000 && gap < 5500 + 1000, `attempt ${i + 1} came ${gap} ms after the one before (Retry-After: 5)`);
  }
  assert.ok(Date.now() - t0 >= 5000, "the retry waited Retry-After");
  assert.equal((await client.sandboxes.get(target.id)).state, "running");

  // The holder itself was never refused: it finishes its restore and runs.
  await holder.waitForState("running", { timeoutMs: 300_000 });
  assert.equal((await holder.exec(["true"])).exitCode, 0);
});
