// Unit tests of the transport against a tiny local HTTP server: retries,
// backoff, Retry-After, idempotency keys, deadlines, error mapping and
// streaming. No ptd involved (the e2e suite covers the real server).
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import {
  CapacityError,
  ConflictError,
  ConnectionError,
  NotFoundError,
  NotResizableError,
  Platinum,
  QuotaExceededError,
  SandboxNotReadyError,
  TimeoutError,
  TtlExceededError,
  backoffMs,
  newIdempotencyKey,
  normalizeCreate,
  retryAfterMs,
} from "@platinum-dev/sdk";

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

let handler: Handler = (_q, res) => res.end();
const seen: { method: string; url: string; key: string | undefined; body: string; at: number }[] = [];
let base = "";
const server = createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (c: string) => (body += c));
  req.on("end", () => {
    seen.push({ method: req.method ?? "", url: req.url ?? "", key: req.headers["idempotency-key"] as string | undefined, body, at: Date.now() });
    handler(req, res, body);
  });
});

before(async () => {
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

function reset(h: Handler) {
  seen.length = 0;
  handler = h;
}

function json(res: ServerResponse, status: number, v: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify(v));
}

const rec = (id: string, state = "running") => ({ id, state, template: "busybox", metadata: {}, created_at: "2026-12-01T00:00:00.000000Z" });

function client(extra: Partial<ConstructorParameters<typeof Platinum>[0]> = {}) {
  return new Platinum({ url: base, token: "pt_unit", retryBaseMs: 10, retryMaxMs: 40, pollIntervalMs: 10, ...extra });
}

describe("retries", () => {
  test("a 503 capacity with Retry-After is retried after it, with the same idempotency key", async () => {
    let n = 0;
    reset((_q, res) => {
      if (n++ < 2) return json(res, 503, { code: "capacity", error: "host busy", reason: "start_queue_full", queued_ms: 3 }, { "Retry-After": "0.2" });
      json(res, 201, rec("sbx_1", "creating"));
    });
    const s = await client().sandboxes.create({ template: "busybox" });
    assert.equal(s.id, "sbx_1");
    assert.equal(seen.length, 3);
    assert.ok(seen[0]!.key?.startsWith("ptk_"));
    assert.ok(seen.every((r) => r.key === seen[0]!.key), "every attempt sends the first attempt's key");
    for (let i = 1; i < 3; i++) assert.ok(seen[i]!.at - seen[i - 1]!.at >= 190, `attempt ${i} waited for Retry-After`);
  });

  test("retries are bounded: the last error surfaces, typed", async () => {
    reset((_q, res) => json(res, 503, { code: "capacity", error: "host busy", reason: "start_queue_timeout", queued_ms: 30000 }));
    const err = await client({ maxRetries: 2 }).sandboxes.get("sbx_x").catch((e: unknown) => e);
    assert.ok(err instanceof CapacityError);
    assert.equal(err.code, "capacity");
    assert.equal(err.status, 503);
    assert.equal(err.reason, "start_queue_timeout");
    assert.equal(err.queuedMs, 30000);
    assert.equal(seen.length, 3, "one call and two retries");
  });

  test("a 429 quota_exceeded is not retried (waiting does not clear a quota)", async () => {
    reset((_q, res) => json(res, 429, { code: "quota_exceeded", error: "max 1", limit: "max_sandboxes", max: 1, scope: "org" }));
    const err = await client().sandboxes.create({ template: "busybox" }).catch((e: unknown) => e);
    assert.ok(err instanceof QuotaExceededError);
    assert.equal(err.limit, "max_sandboxes");
    assert.equal(err.max, 1);
    assert.equal(err.scope, "org");
    assert.equal(seen.length, 1);
  });

  test("a plain 429 and 409 idempotency_key_in_progress are retried", async () => {
    let n = 0;
    reset((_q, res) => {
      n++;
      if (n === 1) return json(res, 429, { code: "rate_limited", error: "slow down" }, { "Retry-After": "0" });
      if (n === 2) return json(res, 409, { code: "idempotency_key_in_progress", error: "running", retry_after_ms: 20 });
      json(res, 200, rec("sbx_2"));
    });
    const s = await client().sandboxes.kill("sbx_2");
    assert.equal(s.id, "sbx_2");
    assert.equal(seen.length, 3);
    assert.equal(new Set(seen.map((r) => r.key)).size, 1);
  });

  test("a retry never sleeps past the call's deadline", async () => {
    reset((_q, res) => json(res, 503, { code: "capacity", error: "busy" }, { "Retry-After": "5" }));
    const t0 = Date.now();
    const err = await client().sandboxes.get("sbx_x", { timeoutMs: 1000 }).catch((e: unknown) => e);
    assert.ok(err instanceof CapacityError, String(err));
    assert.ok(Date.now() - t0 < 900, "gave up at once instead of waiting 5 s");
    assert.equal(seen.length, 1);
    assert.equal(err.retryAfterMs, 5000, "the error says how long the server asked to wait");
  });

  test("a refused connection is a ConnectionError after the retries", async () => {
    const c = new Platinum({ url: "http://127.0.0.1:1", token: "t", maxRetries: 1, retryBaseMs: 1 });
    const err = await c.sandboxes.get("sbx_x").catch((e: unknown) => e);
    assert.ok(err instanceof ConnectionError);
    assert.equal(err.code, "connection");
    assert.equal(err.status, 0);
  });

  test("a streamed upload is sent once, never retried", async () => {
    reset((_q, res) => json(res, 503, { code: "unavailable", error: "down" }));
    const c = client();
    const h = c.sandboxes["handle"]({ id: "sbx_f", state: "running" } as never);
    const body = new ReadableStream<Uint8Array>({
      start(ctrl) {
        ctrl.enqueue(new TextEncoder().encode("hello"));
        ctrl.close();
      },
    });
    await assert.rejects(h.files.write("/tmp/x", body), (e: Error) => e.name === "UnavailableError");
    assert.equal(seen.length, 1);
    assert.equal(seen[0]!.body, "hello");
    assert.ok(seen[0]!.key, "the upload still carries a key");
  });
});

describe("backoff", () => {
  test("exponential, capped, jittered within [d/2, d]", () => {
    assert.equal(backoffMs(0, 100, 1000, undefined, () => 0), 50);
    assert.equal(backoffMs(0, 100, 1000, undefined, () => 1), 100);
    assert.equal(backoffMs(3, 100, 1000, undefined, () => 1), 800);
    assert.equal(backoffMs(10, 100, 1000, undefined, () => 1), 1000);
    assert.equal(backoffMs(10, 100, 1000, undefined, () => 0), 500);
  });
  test("Retry-After is a floor, with at most 10% (≤1 s) of jitter", () => {
    assert.equal(backoffMs(0, 100, 1000, 5000, () => 0), 5000);
    assert.equal(backoffMs(0, 100, 1000, 5000, () => 1), 5500);
    assert.equal(backoffMs(0, 100, 1000, 60000, () => 1), 61000);
  });
  test("Retry-After in seconds and as an HTTP date", () => {
    assert.equal(retryAfterMs("5"), 5000);
    assert.equal(retryAfterMs("0.25"), 250);
    assert.equal(retryAfterMs(null), undefined);
    assert.equal(retryAfterMs("soon"), undefined);
    const now = Date.parse("2026-12-01T00:00:00Z");
    assert.equal(retryAfterMs("Tue, 01 Dec 2026 00:00:07 GMT", now), 7000);
  });
});

describe("idempotency", () => {
  test("every mutating call sends a fresh key; reads send none", async () => {
    reset((q, res) => json(res, q.method === "DELETE" ? 200 : 201, rec("sbx_3")));
    const c = client();
    await c.sandboxes.create({ template: "busybox" });
    await c.sandboxes.create({ template: "busybox" });
    await c.sandboxes.get("sbx_3");
    await c.sandboxes.delete("sbx_3");
    assert.deepEqual(seen.map((r) => r.method), ["POST", "POST", "GET", "DELETE"]);
    assert.ok(seen[0]!.key && seen[1]!.key && seen[3]!.key);
    assert.notEqual(seen[0]!.key, seen[1]!.key);
    assert.equal(seen[2]!.key, undefined);
  });

  test("the caller's key: in the options, or camelCase in the create body (moved to the header)", async () => {
    reset((_q, res) => json(res, 201, rec("sbx_4")));
    const c = client();
    await c.sandboxes.create({ template: "busybox" }, { idempotencyKey: "k-opt" });
    await c.sandboxes.create({ template: "busybox", idempotencyKey: "k-body", ttlMs: 60000 });
    await c.sandboxes.setTtl("sbx_4", { ttlMs: 1000, idempotencyKey: "k-ttl" });
    assert.deepEqual(seen.map((r) => r.key), ["k-opt", "k-body", "k-ttl"]);
    assert.deepEqual(JSON.parse(seen[1]!.body), { template: "busybox", ttl_ms: 60000 });
    assert.deepEqual(JSON.parse(seen[2]!.body), { ttl_ms: 1000 });
  });

  test("normalizeCreate maps camelCase to snake_case and refuses two different spellings", () => {
    assert.deepEqual(normalizeCreate({ templateVersionId: "tplv_1", projectId: "prj_1", parentId: "sbx_p" }).body, {
      template_version_id: "tplv_1",
      project_id: "prj_1",
      parent_id: "sbx_p",
    });
    assert.throws(() => normalizeCreate({ ttlMs: 1, ttl_ms: 2 }), TypeError);
    assert.throws(() => normalizeCreate({ idempotencyKey: "a", idempotency_key: "b" }), TypeError);
  });

  test("keys are random", () => {
    const keys = new Set(Array.from({ length: 1000 }, () => newIdempotencyKey()));
    assert.equal(keys.size, 1000);
    for (const k of keys) assert.match(k, /^ptk_[0-9a-f]{32}$/);
  });
});

describe("waits", () => {
  test("a 202 wait_timed_out create polls the same id and never creates again", async () => {
    let gets = 0;
    reset((q, res) => {
      if (q.method === "POST") return json(res, 202, { ...rec("sbx_w", "creating"), wait_timed_out: true }, { "Retry-After": "5" });
      gets++;
      json(res, 200, rec("sbx_w", gets < 3 ? "creating" : "running"));
    });
    const s = await client().sandboxes.create({ template: "busybox" }, { waitForRunning: true, waitTimeoutMs: 10 });
    assert.equal(s.state, "running");
    assert.equal(seen.filter((r) => r.method === "POST").length, 1);
    assert.match(seen[0]!.url, /wait_for_state=running&wait_timeout_ms=10/);
    assert.ok(seen.slice(1).every((r) => r.method === "GET" && r.url.startsWith("/v1/sandboxes/sbx_w")));
  });

  test("a 202 wait_timed_out stop polls until stopped, one POST", async () => {
    let gets = 0;
    reset((q, res) => {
      if (q.method === "POST") return json(res, 202, { ...rec("sbx_st", "stopping"), wait_timed_out: true }, { "Retry-After": "5" });
      gets++;
      json(res, 200, rec("sbx_st", gets < 2 ? "stopping" : "stopped"));
    });
    const h = client().sandboxes.handle(rec("sbx_st") as never);
    await h.stop({ waitForStopped: true, waitTimeoutMs: 5 });
    assert.equal(h.state, "stopped");
    assert.equal(seen.filter((r) => r.method === "POST").length, 1);
    assert.match(seen[0]!.url, /\/stop\?wait_for_state=stopped&wait_timeout_ms=5$/);
    assert.ok(seen.slice(1).every((r) => r.method === "GET" && r.url.includes("include_deleted=true")));
  });

  test("timeoutMs bounds the polling: TimeoutError, still one create", async () => {
    reset((q, res) => json(res, q.method === "POST" ? 202 : 200, rec("sbx_slow", "creating")));
    const err = await client().sandboxes.create({ template: "busybox" }, { waitForRunning: true, timeoutMs: 200 }).catch((e: unknown) => e);
    assert.ok(err instanceof TimeoutError, String(err));
    assert.equal(err.code, "timeout");
    assert.equal(seen.filter((r) => r.method === "POST").length, 1);
  });

  test("a failed sandbox ends a wait with SandboxStateError", async () => {
    reset((q, res) => json(res, q.method === "POST" ? 202 : 200, { ...rec("sbx_f", q.method === "POST" ? "starting" : "failed"), reason: "boom" }));
    const h = client().sandboxes["handle"](rec("sbx_f", "stopped") as never);
    await assert.rejects(h.start({ waitForRunning: true }), (e: Error & { got?: string; want?: string }) => e.name === "SandboxStateError" && e.got === "failed" && e.want === "running");
  });

  test("signal aborts a wait", async () => {
    reset((q, res) => json(res, q.method === "POST" ? 202 : 200, rec("sbx_a", "creating")));
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("stop waiting")), 100);
    await assert.rejects(client().sandboxes.create({}, { waitForRunning: true, signal: ac.signal }), /stop waiting/);
  });
});

describe("errors", () => {
  const cases: [number, Record<string, unknown>, new (...a: never[]) => Error, string][] = [
    [404, { code: "not_found", error: "no sandbox", field: "id" }, NotFoundError, "not_found"],
    [400, { code: "sandbox_ttl_exceeded", error: "too long", field: "ttl_ms", max_ttl_ms: 3600000 }, TtlExceededError, "sandbox_ttl_exceeded"],
    [409, { code: "sandbox_not_ready", error: "stopped", state: "stopped" }, SandboxNotReadyError, "sandbox_not_ready"],
    [409, { code: "conflict", error: "children", children: ["sbx_c"] }, ConflictError, "conflict"],
    [409, { code: "sandbox_not_resizable", error: "no", hint: { action: "stop_then_resize", applies_at: "restart", steps: ["a", "b"] } }, NotResizableError, "sandbox_not_resizable"],
    [404, "<html>not here</html>" as never, NotFoundError, "not_found"],
  ];
  for (const [status, body, cls, code] of cases) {
    test(`${status} ${code} → ${cls.name}`, async () => {
      reset((_q, res) => {
        if (typeof body === "string") {
          res.writeHead(status, { "Content-Type": "text/html", "X-Request-Id": "req_1" });
          return res.end(body);
        }
        json(res, status, body, { "X-Request-Id": "req_1" });
      });
      const err = await client({ maxRetries: 0 }).sandboxes.get("sbx_e").catch((e: unknown) => e);
      assert.ok(err instanceof cls, String(err));
      const pe = err as InstanceType<typeof NotFoundError>;
      assert.equal(pe.code, code);
      assert.equal(pe.status, status);
      assert.equal(pe.requestId, "req_1");
      if (err instanceof TtlExceededError) assert.equal(err.maxTtlMs, 3600000);
      if (err instanceof SandboxNotReadyError) assert.equal(err.state, "stopped");
      if (err instanceof NotResizableError) assert.deepEqual(err.hint?.steps, ["a", "b"]);
      if (err instanceof ConflictError && code === "conflict") assert.deepEqual(err.children, ["sbx_c"]);
      if (typeof body === "string") assert.match(pe.message, /not here/);
      else assert.equal(pe.field, body["field"]);
    });
  }
});

describe("streams", () => {
  test("exec output is handed on as each line arrives, before the command ends", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    reset(async (_q, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.write(JSON.stringify({ type: "start", pid: 7 }) + "\n");
      res.write(JSON.stringify({ type: "stdout", data: "first\n" }) + "\n");
      await gate;
      res.write(JSON.stringify({ type: "stderr", data: "late\n" }) + "\n");
      res.end(JSON.stringify({ type: "exit", exit_code: 3, timed_out: false }) + "\n");
    });
    const h = client().sandboxes["handle"](rec("sbx_s") as never);
    const got: string[] = [];
    const p = h.exec(["x"], { onStdout: (d) => { got.push("out:" + d); release(); }, onStderr: (d) => got.push("err:" + d) });
    const r = await p;
    assert.deepEqual(got, ["out:first\n", "err:late\n"]);
    assert.equal(r.exitCode, 3);
    assert.match(seen[0]!.url, /stream=true/);
  });

  test("an error event throws the matching typed error", async () => {
    reset((_q, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.end(JSON.stringify({ type: "error", code: "sandbox_not_ready", error: "stopped meanwhile" }) + "\n");
    });
    const h = client().sandboxes["handle"](rec("sbx_s") as never);
    const s = await h.execStream("true");
    await assert.rejects(s.wait(), SandboxNotReadyError);
  });

  test("a stream cut before exit is a StreamEndedError", async () => {
    reset((_q, res) => {
      res.writeHead(200, { "Content-Type": "application/x-ndjson" });
      res.end(JSON.stringify({ type: "stdout", data: "x" }) + "\n");
    });
    const h = client().sandboxes["handle"](rec("sbx_s") as never);
    await assert.rejects((await h.execStream("true")).wait(), (e: Error) => e.name === "StreamEndedError");
  });
});
