// A runner for `go run ./bench/sdk` without any SDK: the same loop with
// node's own fetch and hand-written requests. Beside ts.mjs it separates
// what the TypeScript SDK adds from the gap between node's HTTP client and
// Go's. Protocol: runner.mjs.
import { randomUUID } from "node:crypto";
import { main } from "./runner.mjs";

const api = process.env.PT_API_URL;
const h = { Authorization: `Bearer ${process.env.PT_TOKEN}`, "Content-Type": "application/json" };
const key = () => ({ ...h, "Idempotency-Key": "ptk_" + randomUUID().replaceAll("-", "") });

async function call(method, path, body) {
  const res = await fetch(api + path, { method, headers: method === "GET" ? h : key(), ...(body ? { body: JSON.stringify(body) } : {}) });
  const out = await res.json();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

await main("node-fetch", async (template) => {
  const t0 = performance.now();
  const sb = await call("POST", "/v1/sandboxes?wait_for_state=running", { template });
  const t1 = performance.now();
  const r = await call("POST", `/v1/sandboxes/${sb.id}/exec`, { cmd: ["true"] });
  const t2 = performance.now();
  if (r.exit_code !== 0) throw new Error(`true exited ${r.exit_code}`);
  await call("DELETE", `/v1/sandboxes/${sb.id}`);
  const t3 = performance.now();
  while ((await call("GET", `/v1/sandboxes/${sb.id}?include_deleted=true`)).state !== "deleted") await new Promise((r) => setTimeout(r, 20));
  return { total_ms: t3 - t0, create_ms: t1 - t0, exec_ms: t2 - t1, delete_ms: t3 - t2 };
}, (id) => call("GET", `/v1/sandboxes/${id}`));
