// The SDK against a real ptd beyond the docs' examples: pagination, a
// typed error for each code ptd produces, retries, waits that resume
// polling, idempotent creates, streamed files and streamed exec.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import {
  CapacityError,
  ConflictError,
  ForbiddenError,
  InvalidRequestError,
  NotFoundError,
  NotResizableError,
  Platinum,
  QuotaExceededError,
  SandboxDestroyedError,
  SandboxNotReadyError,
  TtlExceededError,
  AuthenticationError,
} from "@platinum-dev/sdk";
import { admin, cleanup, freshOrg, running, url } from "./helpers.mjs";

// A full garbage collection on demand (as --expose-gc gives), for the
// memory bound of the streamed file test.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** ArrayBuffer bytes still held after a full garbage collection. */
function held(): number {
  gc();
  return process.memoryUsage().arrayBuffers;
}

/** A fetch that records every request's method, path and answer status. */
function recordingFetch() {
  const log: { method: string; path: string; status: number | "error"; key: string | null }[] = [];
  const f: typeof fetch = async (input, init) => {
    const u = new URL(String(input));
    const key = new Headers(init?.headers).get("idempotency-key");
    try {
      const res = await fetch(input, init);
      log.push({ method: init?.method ?? "GET", path: u.pathname + u.search, status: res.status, key });
      return res;
    } catch (e) {
      log.push({ method: init?.method ?? "GET", path: u.pathname + u.search, status: "error", key });
      throw e;
    }
  };
  return { f, log };
}

describe("sdk against ptd", () => {
  let client: Platinum;
  let token: string;
  let orgId: string;
  before(async () => {
    ({ client, token, orgId } = await freshOrg("ts-sdk"));
  });
  after(async () => {
    await cleanup(client);
  });

  test("pagination: list pages with offset, iterate walks every page once", async () => {
    const { client: c, token: pagesToken } = await freshOrg("ts-pages");
    try {
      const made = new Set<string>();
      for (let i = 0; i < 5; i++) made.add((await c.sandboxes.create({ template: "busybox", metadata: { page: "yes" } })).id);
      const p1 = await c.sandboxes.list({ limit: 2, paginated: true });
      const p2 = await c.sandboxes.list({ limit: 2, offset: 2, paginated: true });
      const p3 = await c.sandboxes.list({ limit: 2, offset: 4, paginated: true });
      assert.equal(p1.total, 5);
      assert.deepEqual([p1.rows.length, p2.rows.length, p3.rows.length], [2, 2, 1]);
      const paged = [...p1.rows, ...p2.rows, ...p3.rows].map((r) => r.id);
      assert.deepEqual(new Set(paged), made);
      assert.deepEqual(p1.data.map((h) => h.id), p1.rows.map((r) => r.id), "data holds the same sandboxes as handles");

      const { f, log } = recordingFetch();
      const rc = new Platinum({ url, token: pagesToken, fetch: f });
      const walked: string[] = [];
      for await (const s of rc.sandboxes.iterate({ limit: 2, metadata: { page: "yes" } })) walked.push(s.id);
      assert.deepEqual(walked, paged, "iterate yields newest first, every sandbox once");
      assert.equal(log.filter((r) => r.path.startsWith("/v1/sandboxes?")).length, 3, "three pages of two");
    } finally {
      await cleanup(c);
    }
  });

  describe("typed errors", () => {
    test("not_found", async () => {
      const err = await client.sandboxes.get("sbx_01K0000000000000000000000").catch((e: unknown) => e);
      assert.ok(err instanceof NotFoundError);
      assert.equal(err.code, "not_found");
      assert.equal(err.status, 404);
      assert.match(err.message, /not_found/);
    });

    test("invalid_request names the field", async () => {
      const err = await client.sandboxes.list({ limit: 500 }).catch((e: unknown) => e);
      assert.ok(err instanceof InvalidRequestError, String(err));
      assert.equal(err.code, "invalid_request");
      assert.equal(err.field, "limit");
    });

    test("unauthorized", async () => {
      const bad = new Platinum({ url, token: "pt_wrong" });
      const err = await bad.sandboxes.list().catch((e: unknown) => e);
      assert.ok(err instanceof AuthenticationError);
      assert.equal(err.status, 401);
    });

    test("forbidden: an org token may not set quotas", async () => {
      const err = await client.orgs.setQuotas(orgId, { max_sandboxes: 100 }).catch((e: unknown) => e);
      assert.ok(err instanceof ForbiddenError, String(err));
      assert.equal(err.code, "forbidden");
      assert.equal(err.status, 403);
    });

    test("quota_exceeded, with limit and max, not retried", async () => {
      const o = await freshOrg("ts-quota");
      try {
        await admin.orgs.setQuotas(o.orgId, { max_sandboxes: 1 });
        await o.client.sandboxes.create({ template: "busybox" });
        const { f, log } = recordingFetch();
        const c = new Platinum({ url, token: o.token, fetch: f });
        const err = await c.sandboxes.create({ template: "busybox" }).catch((e: unknown) => e);
        assert.ok(err instanceof QuotaExceededError, String(err));
        assert.equal(err.code, "quota_exceeded");
        assert.equal(err.status, 429);
        assert.equal(err.limit, "sandboxes");
        assert.equal(err.max, 1);
        assert.equal(log.length, 1, "a quota refusal is not retried");
        assert.equal((await o.client.sandboxes.list()).rows.length, 1, "the refused create made nothing");
      } finally {
        await cleanup(o.client);
      }
    });

    test("sandbox_ttl_exceeded, with maxTtlMs", async () => {
      const err = await client.sandboxes.create({ template: "busybox", ttlMs: 3_600_001 }).catch((e: unknown) => e);
      assert.ok(err instanceof TtlExceededError, String(err));
      assert.ok(err instanceof InvalidRequestError, "a TTL error is an invalid request too");
      assert.equal(err.code, "sandbox_ttl_exceeded");
      assert.equal(err.maxTtlMs, 3_600_000);
    });

    test("sandbox_destroyed", async () => {
      const s = await client.sandboxes.create({ template: "busybox", ttlMs: 60_000 });
      await s.kill();
      const err = await s.setTtl({ ttlMs: 60_000 }).catch((e: unknown) => e);
      assert.ok(err instanceof SandboxDestroyedError, String(err));
      assert.ok(err instanceof ConflictError);
      assert.equal(err.code, "sandbox_destroyed");
      assert.equal(err.status, 409);
    });

    test("conflict: deleting a parent with live children names them", async () => {
      const parent = await running(client);
      const child = await client.sandboxes.create({ template: "busybox", parent_id: parent.id });
      const err = await parent.delete().catch((e: unknown) => e);
      assert.ok(err instanceof ConflictError, String(err));
      assert.equal(err.code, "conflict");
      assert.deepEqual(err.children, [child.id]);
      await child.delete();
    });

    test("idempotency_key_reused", async () => {
      const key = "ts-reused-" + randomBytes(4).toString("hex");
      await client.sandboxes.create({ template: "busybox" }, { idempotencyKey: key });
      const err = await client.sandboxes.create({ template: "busybox", name: "other" }, { idempotencyKey: key }).catch((e: unknown) => e);
      assert.ok(err instanceof ConflictError, String(err));
      assert.equal(err.code, "idempotency_key_reused");
    });

    test("sandbox_not_ready: exec in a stopped sandbox, with its state", async () => {
      const s = await running(client);
      await s.stop({ waitForStopped: true });
      const err = await s.exec(["true"]).catch((e: unknown) => e);
      assert.ok(err instanceof SandboxNotReadyError, String(err));
      assert.equal(err.code, "sandbox_not_ready");
      assert.equal(err.state, "stopped");
    });

    test("sandbox_not_resizable, with the hint", async () => {
      const s = await running(client);
      const err = await s.resize({ cpu: 64 }).catch((e: unknown) => e);
      assert.ok(err instanceof NotResizableError, String(err));
      assert.equal(err.code, "sandbox_not_resizable");
      assert.equal(err.hint?.action, "stop_then_resize");
      assert.deepEqual(err.hint?.steps, [`POST /v1/sandboxes/${s.id}/stop`, `POST /v1/sandboxes/${s.id}/resize`]);
      assert.equal(err.liveResize?.supported, false);
    });
  });

  test("a 503 on a create: retried after Retry-After with the same key; typed when retries run out", async () => {
    // ptd never queues creates (admission.test.mts has its real 503
    // capacity, on a start); here a proxy in front of it refuses the first
    // creates, as a load balancer shedding load would, and the retry must
    // not make a second sandbox.
    let refuse = 2;
    const keys: (string | undefined)[] = [];
    const proxy = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      if (req.method === "POST" && req.url?.startsWith("/v1/sandboxes") && !req.url.includes("/", "/v1/sandboxes".length)) {
        keys.push(req.headers["idempotency-key"] as string | undefined);
        if (refuse-- > 0) {
          res.writeHead(503, { "Content-Type": "application/json", "Retry-After": "1" });
          return res.end(JSON.stringify({ code: "capacity", error: "the host's start queue is full; retry after Retry-After", reason: "start_queue_full", queued_ms: 0 }));
        }
      }
      const up = await fetch(url + req.url, {
        method: req.method!,
        headers: Object.fromEntries(Object.entries(req.headers).filter(([k]) => k !== "host" && k !== "content-length") as [string, string][]),
        ...(chunks.length ? { body: Buffer.concat(chunks) } : {}),
      });
      res.writeHead(up.status, Object.fromEntries(up.headers));
      res.end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const purl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const c = new Platinum({ url: purl, token });
      const t0 = Date.now();
      const s = await c.sandboxes.create({ template: "busybox" }, { waitForRunning: true });
      assert.equal(s.state, "running");
      assert.ok(Date.now() - t0 >= 2000, "waited Retry-After twice");
      assert.equal(keys.length, 3);
      assert.ok(keys[0] && keys.every((k) => k === keys[0]), "one key for all three attempts");

      refuse = 5;
      const err = await new Platinum({ url: purl, token, maxRetries: 1 }).sandboxes.create({ template: "busybox" }).catch((e: unknown) => e);
      assert.ok(err instanceof CapacityError, String(err));
      assert.equal(err.status, 503);
      assert.equal(err.reason, "start_queue_full");
    } finally {
      proxy.close();
    }
  });

  test("a 202 wait_timed_out create keeps polling the same sandbox and never creates again", async () => {
    const { f, log } = recordingFetch();
    const c = new Platinum({ url, token, fetch: f, pollIntervalMs: 100 });
    const s = await c.sandboxes.create({ template: "pt-base" }, { waitForRunning: true, waitTimeoutMs: 1 });
    assert.equal(s.state, "running");
    const posts = log.filter((r) => r.method === "POST");
    assert.equal(posts.length, 1, "one create");
    assert.equal(posts[0]!.status, 202, "the server's 1 ms wait ran out");
    assert.ok(log.slice(1).every((r) => r.method === "GET" && r.path.startsWith(`/v1/sandboxes/${s.id}`)), "then only polls of that id");
    assert.ok(log.length >= 2);
    await s.delete();
  });

  test("idempotent create: a lost answer is retried with the same key and gives the same sandbox", async () => {
    const o = await freshOrg("ts-idem");
    try {
      // The first answer is dropped after ptd handled the create, as a
      // connection reset would; the SDK resends with the same key.
      let drop = true;
      const keys: string[] = [];
      const f: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        if ((init?.method ?? "GET") === "POST") {
          keys.push(new Headers(init?.headers).get("idempotency-key") ?? "");
          if (drop) {
            drop = false;
            await res.body?.cancel();
            throw new TypeError("fetch failed (the answer was lost)");
          }
        }
        return res;
      };
      const c = new Platinum({ url, token: o.token, fetch: f, retryBaseMs: 10 });
      const s = await c.sandboxes.create({ template: "busybox", name: "once" });
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1]);
      const { rows } = await o.client.sandboxes.list();
      assert.deepEqual(rows.map((r) => r.id), [s.id], "exactly one sandbox exists");

      // The caller's own key across two calls (a retry of the whole operation).
      const again1 = await o.client.sandboxes.create({ template: "busybox", idempotencyKey: "ts-op-1" });
      const again2 = await o.client.sandboxes.create({ template: "busybox", idempotencyKey: "ts-op-1" });
      assert.equal(again1.id, again2.id);
      assert.equal((await o.client.sandboxes.list()).rows.length, 2);
    } finally {
      await cleanup(o.client);
    }
  });

  test("files: a 10 MB file streams in and out intact, never whole in memory", async (t) => {
    const s = await running(client);
    const size = 10 * 1024 * 1024;
    const piece = 64 * 1024;
    // What the process holds in ArrayBuffers (file bytes live there) once
    // garbage is collected, above where it started: a write that gathered
    // the body, or a read that buffered the answer, holds all 10 MB at once.
    const base = held();
    let peakUp = 0;
    const up = createHash("sha256");
    let chunks = 0;
    // The file is generated as the upload pulls it, 64 KB at a time.
    async function* gen() {
      for (let sent = 0; sent < size; sent += piece) {
        const c = randomBytes(piece);
        up.update(c);
        if (++chunks % 8 === 0) peakUp = Math.max(peakUp, held() - base);
        yield c;
      }
    }
    const w = await s.files.write("/tmp/big.bin", gen());
    assert.equal(w.size, size);
    assert.equal(chunks, size / piece);
    const want = up.digest("hex");
    const inSandbox = await s.exec(["sha256sum", "/tmp/big.bin"]);
    assert.equal(inSandbox.stdout.split(" ")[0], want, "the sandbox has the same bytes");

    const stream = await s.files.read("/tmp/big.bin", { format: "stream" });
    const down = createHash("sha256");
    let got = 0;
    let pieces = 0;
    let peakDown = 0;
    for await (const c of stream as unknown as AsyncIterable<Uint8Array>) {
      down.update(c);
      got += c.byteLength;
      if (++pieces % 8 === 0) peakDown = Math.max(peakDown, held() - base);
    }
    assert.equal(got, size);
    assert.ok(pieces > 1, "the body arrived in pieces, not as one buffer");
    assert.equal(down.digest("hex"), want);
    const mb = (n: number) => (n / 2 ** 20).toFixed(1);
    t.diagnostic(`held at most ${mb(peakUp)} MB while uploading, ${mb(peakDown)} MB while downloading`);
    const bound = 4 * 1024 * 1024;
    assert.ok(peakUp < bound, `the upload held ${mb(peakUp)} MB at once (bound 4 MB of 10)`);
    assert.ok(peakDown < bound, `the download held ${mb(peakDown)} MB at once (bound 4 MB of 10)`);
  });

  test("files: text, bytes, list, mkdir, remove", async () => {
    const s = await running(client);
    assert.deepEqual(await s.files.mkdir("/tmp/d/e"), { path: "/tmp/d/e", created: true });
    assert.equal((await s.files.mkdir("/tmp/d/e")).created, false);
    await s.files.write("/tmp/d/e/a.txt", "héllo\n");
    await s.files.write("/tmp/d/e/b.bin", new Uint8Array([0, 1, 2, 255]));
    assert.equal(await s.files.read("/tmp/d/e/a.txt"), "héllo\n");
    assert.deepEqual(await s.files.read("/tmp/d/e/b.bin", { format: "bytes" }), new Uint8Array([0, 1, 2, 255]));
    const names = (await s.files.list("/tmp/d/e")).map((e) => `${e.name}:${e.type}:${e.size}`).sort();
    assert.deepEqual(names, ["a.txt:file:7", "b.bin:file:4"]);
    assert.equal(await s.files.exists("/tmp/d/e/a.txt"), true);
    await s.files.remove("/tmp/d");
    assert.equal(await s.files.exists("/tmp/d/e/a.txt"), false);
    await assert.rejects(s.files.read("/tmp/d/e/a.txt"), NotFoundError);
  });

  test("streamed exec: output arrives before the command ends", async () => {
    const s = await running(client);
    // The command cannot finish until the test, having seen its first
    // line, creates /tmp/go: so that line arrived while it still ran.
    const script = "echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second >&2; exit 7";
    const events: string[] = [];
    const stream = await s.execStream(["sh", "-c", script]);
    for await (const ev of stream) {
      if (ev.type === "stdout" || ev.type === "stderr") events.push(`${ev.type}:${ev.data}`);
      if (ev.type === "stdout" && ev.data.includes("first")) await s.files.write("/tmp/go", "");
      if (ev.type === "exit") events.push(`exit:${ev.exitCode}`);
    }
    assert.deepEqual(events, ["stdout:first\n", "stderr:second\n", "exit:7"]);

    // The callback form: exec with onStdout streams, the same way.
    const seen: string[] = [];
    const r = await s.exec(["sh", "-c", "rm -f /tmp/go; echo one; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo two"], {
      onStdout: (d) => {
        seen.push(d);
        if (d.includes("one")) void s.files.write("/tmp/go", "");
      },
    });
    assert.equal(r.exitCode, 0);
    assert.deepEqual(seen.join(""), "one\ntwo\n");
  });

  test("exec: exit code, stdout, stderr, env, cwd, stdin, command timeout", async () => {
    const s = await running(client);
    const r = await s.exec(["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert.deepEqual([r.exitCode, r.stdout, r.stderr, r.timedOut], [3, "out\n", "err\n", false]);
    assert.equal((await s.exec("echo $X $PWD", { env: { X: "x1" }, cwd: "/tmp" })).stdout, "x1 /tmp\n");
    assert.equal((await s.exec(["cat"], { stdin: "fed" })).stdout, "fed");
    const slow = await s.exec(["sleep", "30"], { commandTimeoutMs: 300 });
    assert.equal(slow.timedOut, true);
  });

  test("metrics, usage, preview URL, network policy, snapshot, restore, fork", async () => {
    const s = await running(client);
    const m = await s.metrics();
    assert.ok(m.memory_limit_bytes > 0);
    const u = await s.usage();
    assert.equal(u.id, s.id);
    const p = await s.previewUrl(8080);
    assert.equal(p.port, 8080);
    assert.match(p.url, /^http/);
    assert.equal((await s.preview.setPublic(8080, true)).public, true);
    await s.preview.revoke(8080);
    const n = await s.setNetwork({ egress: "deny", allow_out: [], deny_out: [] });
    assert.equal(n.network.egress, "deny");

    await s.files.write("/root/state.txt", "one");
    const snap = await s.snapshot({ name: "before" });
    assert.match(snap.id, /^snap_/);
    await s.files.write("/root/state.txt", "two");
    await s.restore(snap.id, { waitForRunning: true });
    assert.equal(s.state, "running");
    assert.equal(await s.files.read("/root/state.txt"), "one");
    assert.ok((await s.snapshots()).some((x) => x.id === snap.id));

    const fork = await s.fork({ count: 1, wait: true, metadata: { copy: "yes" } });
    assert.equal(fork.sourceId, s.id);
    assert.equal(fork.sandboxes[0]!.metadata?.["copy"], "yes");
    assert.equal(fork.sandboxes.length, 1);
    const copy = fork.sandboxes[0]!;
    await copy.waitForState("running", { timeoutMs: 120_000 });
    assert.equal(await copy.files.read("/root/state.txt"), "one");
    assert.equal(copy.parent_id, s.id);
    await copy.delete();
  });

  test("artifacts and backups through the handle", async () => {
    const s = await running(client);
    await s.files.write("/root/report.txt", "report body\n");
    const a = await s.artifacts.create({ path: "/root/report.txt" });
    assert.match(a.id, /^art_/);
    assert.equal(a.size_bytes, 12);
    assert.ok((await s.artifacts.list()).some((x) => x.id === a.id));
    assert.equal((await client.artifacts.get(a.id)).sandbox_id, s.id);
    const body = await s.artifacts.download(a.id);
    assert.equal(await new Response(body).text(), "report body\n");
    await s.artifacts.delete(a.id);
    await assert.rejects(client.artifacts.get(a.id), NotFoundError);

    const b = await s.backup({ name: "nightly", wait: true });
    assert.match(b.id, /^bkp_/);
    assert.equal(b.state, "ready");
    assert.ok((await s.backups()).some((x) => x.id === b.id));
  });

  test("signal and timeoutMs abort a call", async () => {
    const s = await running(client);
    const ac = new AbortController();
    const p = s.exec(["sleep", "5"], { signal: ac.signal });
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(p, (e: Error) => e.name === "AbortError");
    await assert.rejects(s.exec(["sleep", "5"], { timeoutMs: 300 }), (e: Error) => e.name === "TimeoutError");
  });
});
