// Shared setup of the end-to-end tests: they run against the real ptd
// named by PT_API_URL and PT_TOKEN (a platform admin token), each suite in
// an organization of its own so lists see only what the suite made.
import assert from "node:assert/strict";
import { Platinum, type SandboxHandle } from "@platinum-dev/sdk";

export const url = process.env.PT_API_URL ?? "";
export const adminToken = process.env.PT_TOKEN ?? "";
if (!url || !adminToken) throw new Error("the e2e tests need PT_API_URL and PT_TOKEN (tests/sdk/ts sets them)");

export const admin = new Platinum({ url, token: adminToken });

export function rand(n = 6): string {
  return Math.random().toString(16).slice(2, 2 + n).padEnd(n, "0");
}

/** A fresh org and a client with its token. */
export async function freshOrg(name: string): Promise<{ orgId: string; token: string; client: Platinum }> {
  const { org, token } = await admin.orgs.create({ name: `${name}-${rand()}` });
  return { orgId: org.id, token, client: new Platinum({ url, token }) };
}

/** Deletes every sandbox of the client's org (children first), best effort. */
export async function cleanup(client: Platinum): Promise<void> {
  for (let round = 0; round < 3; round++) {
    const { rows } = await client.sandboxes.list({ limit: 200 });
    if (rows.length === 0) return;
    const parents = new Set(rows.map((r) => r.parent_id).filter(Boolean));
    for (const r of rows) {
      if (parents.has(r.id)) continue;
      await client.sandboxes.delete(r.id).catch(() => {});
    }
  }
}

export async function running(client: Platinum, template = "busybox"): Promise<SandboxHandle> {
  const s = await client.sandboxes.create({ template }, { waitForRunning: true, timeoutMs: 300_000 });
  assert.equal(s.state, "running");
  return s;
}
