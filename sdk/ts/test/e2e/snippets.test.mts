// Every TypeScript example of the product docs, copied verbatim and run
// against a real ptd. Each block is marked with where it comes from:
// "sandboxes guide" is the Sandboxes page (docs: Create, Auto-resume, List,
// Parent and child sandboxes, Get, Rename, Update environment variables,
// Stop and start, Resize, Archive, Delete); "sdk reference" is the
// client.sandboxes reference page (create, get, setTtl, list, kill,
// Sandbox object). Code between the markers is the example unchanged;
// code around it sets up what the example assumes (a `client`, a
// `parent`, a running `sbx`) and checks what it did.
//
// sandboxes guide, Create (the import line; the rest of the example is in the first test):
import { Platinum } from "@platinum-dev/sdk";

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  NotFoundError,
  type CreateSandboxInput,
  type ListSandboxesInput,
  type ListSandboxHandlesResponse,
  type SandboxHandle,
} from "@platinum-dev/sdk";
import { cleanup, freshOrg, running } from "./helpers.mjs";

/** Runs fn with console.log captured; returns what it logged. */
async function logged(fn: () => Promise<void>): Promise<unknown[][]> {
  const lines: unknown[][] = [];
  const orig = console.log;
  console.log = (...args: unknown[]) => {
    lines.push(args);
  };
  try {
    await fn();
  } finally {
    console.log = orig;
  }
  return lines;
}

const iso = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

describe("sandboxes guide", () => {
  let client: Platinum;
  before(async () => {
    client = (await freshOrg("ts-guide")).client;
  });
  after(async () => {
    await cleanup(client);
  });

  test("Create", async () => {
    const sbx0 = await (async () => {
      // ---- sandboxes guide, Create ----
      const client = new Platinum({ url: process.env.PT_API_URL!, token: process.env.PT_TOKEN! });
      const sbx = await client.sandboxes.create(
        { template: "pt-base", cpu: 2, ram_mb: 1024 },
        { waitForRunning: true },
      );
      // ---- end ----
      return sbx;
    })();
    try {
      assert.equal(sbx0.state, "running");
      assert.equal(sbx0.cpu, 2);
      assert.equal(sbx0.ram_mb, 1024);
      assert.equal(sbx0.template, "pt-base");
      assert.match(sbx0.id, /^sbx_/);
    } finally {
      await sbx0.delete();
    }
  });

  test("Auto-resume", async () => {
    const sbx0 = await (async () => {
      // ---- sandboxes guide, Auto-resume ----
      const sbx = await client.sandboxes.create({ template: "pt-base", auto_resume: false });
      await sbx.setAutoResume(true);                                  // turn it back on
      await client.sandboxes.update(sbx.id, { auto_resume: false });  // or by id
      // ---- end ----
      return sbx;
    })();
    assert.equal(sbx0.auto_resume, true, "the handle reflects setAutoResume(true)");
    const now = await client.sandboxes.get(sbx0.id);
    assert.equal(now.auto_resume, false, "update by id turned it off again");
  });

  test("List", async () => {
    const a = await running(client);
    const b = await running(client);
    const rows0 = await (async () => {
      // ---- sandboxes guide, List ----
      const { rows } = await client.sandboxes.list({ state: "running", limit: 100 });
      for await (const s of client.sandboxes.iterate({ state: "running" })) { /* auto-paginate */ }
      // ---- end ----
      return rows;
    })();
    // The same iteration, collecting what it yields.
    const seen: string[] = [];
    for await (const s of client.sandboxes.iterate({ state: "running" })) seen.push(s.id);
    for (const id of [a.id, b.id]) {
      assert.ok(rows0.some((r) => r.id === id), `list has ${id}`);
      assert.ok(seen.includes(id), `iterate yields ${id}`);
    }
    assert.ok(rows0.every((r) => r.state === "running"));
  });

  test("Parent and child sandboxes", async () => {
    const parent = await running(client);
    const out = await (async () => {
      // ---- sandboxes guide, Parent and child sandboxes ----
      const child = await client.sandboxes.create({ template: "pt-base", parent_id: parent.id });
      const kids = await client.sandboxes.children(parent.id);
      // ---- end ----
      return { child, kids };
    })();
    assert.equal(out.child.parent_id, parent.id);
    assert.equal(out.child.parentId, parent.id);
    assert.deepEqual(out.kids.map((k) => k.id), [out.child.id]);

    const lists = await (async () => {
      // ---- sandboxes guide, Parent and child sandboxes (list by position) ----
      const children = await client.sandboxes.list({ parent_id: parent.id });
      const roots = await client.sandboxes.list({ rootsOnly: true });
      // ---- end ----
      return { children, roots };
    })();
    assert.deepEqual(lists.children.rows.map((r) => r.id), [out.child.id]);
    assert.ok(lists.roots.rows.some((r) => r.id === parent.id));
    assert.ok(!lists.roots.rows.some((r) => r.id === out.child.id), "a child is not a root");
    await out.child.delete();
  });

  test("Get (the example's ids do not exist)", async () => {
    await assert.rejects(async () => {
      // ---- sandboxes guide, Get ----
      const s = await client.sandboxes.get("sbx_01K…");
      const sbx = await client.sandboxes.connect("sbx_01K…");
      // ---- end ----
      void s, sbx;
    }, NotFoundError);
    // The same calls with an id that exists.
    const real = await running(client);
    const s = await client.sandboxes.get(real.id);
    const sbx = await client.sandboxes.connect(real.id);
    assert.equal(s.id, real.id);
    assert.equal((await sbx.exec(["echo", "connected"])).stdout, "connected\n");
  });

  test("Rename, Update environment variables", async () => {
    const sbx = await running(client, "pt-base");
    // ---- sandboxes guide, Rename ----
    await sbx.rename("ci-runner-2");
    // ---- end ----
    assert.equal(sbx.name, "ci-runner-2");
    assert.equal((await client.sandboxes.get(sbx.id)).name, "ci-runner-2");
    await sbx.rename(null);
    assert.equal((await client.sandboxes.get(sbx.id)).name ?? null, null, "null clears the name");

    await sbx.setEnv({ OLD_UNUSED: "old" });
    // ---- sandboxes guide, Update environment variables ----
    await sbx.setEnv({ API_TOKEN: "new-value", OLD_UNUSED: null });
    (await sbx.exec(["printenv", "API_TOKEN"])).stdout;   // new-value; OLD_UNUSED is unset
    // ---- end ----
    assert.equal((await sbx.exec(["printenv", "API_TOKEN"])).stdout, "new-value\n");
    const old = await sbx.exec(["printenv", "OLD_UNUSED"]);
    assert.equal(old.exitCode, 1, "OLD_UNUSED is unset");
    assert.equal(old.stdout, "");
  });

  test("Stop and start, Resize, Archive, Delete", async () => {
    const sbx = await running(client);
    // ---- sandboxes guide, Stop and start ----
    await sbx.stop({ waitForStopped: true });
    await sbx.start({ waitForRunning: true });
    // ---- end ----
    assert.equal(sbx.state, "running");
    assert.equal((await sbx.exec(["true"])).exitCode, 0);

    await sbx.stop({ waitForStopped: true });
    assert.equal(sbx.state, "stopped");
    const resized = await (async () => {
      // ---- sandboxes guide, Resize ----
      await sbx.resize({ cpu: 4, ram_mb: 8192, disk_gb: 8 });
      // ---- end ----
      return client.sandboxes.get(sbx.id);
    })();
    assert.equal(resized.cpu, 4);
    assert.equal(resized.ram_mb, 8192);
    assert.equal(resized.disk_gb, 8);

    // ---- sandboxes guide, Archive ----
    await sbx.archive();
    // ---- end ----
    assert.ok(["archiving", "archived"].includes(sbx.state), `archive left ${sbx.state}`);
    await sbx.waitForState("archived", { timeoutMs: 120_000 });

    // ---- sandboxes guide, Delete ----
    await sbx.delete();
    // ---- end ----
    assert.ok(["deleting", "deleted"].includes(sbx.state));
    await sbx.waitForState("deleted", { timeoutMs: 120_000 });
    await assert.rejects(client.sandboxes.get(sbx.id), NotFoundError);
  });
});

describe("sdk reference (client.sandboxes)", () => {
  let client: Platinum;
  before(async () => {
    client = (await freshOrg("ts-ref")).client;
  });
  after(async () => {
    await cleanup(client);
  });

  test("signatures", () => {
    // ---- sdk reference, create / get / setTtl / list / kill signatures, as types ----
    type Create = (input?: CreateSandboxInput) => Promise<SandboxHandle>;
    type Get = (sandboxId: `sbx_${string}`) => Promise<SandboxHandle>;
    type SetTtl = (
      sandboxId: `sbx_${string}`,
      input: { ttlMs: number; idempotencyKey?: string },
    ) => Promise<SandboxHandle>;
    type List = (input?: ListSandboxesInput) => Promise<ListSandboxHandlesResponse>;
    type Kill = (sandboxId: `sbx_${string}`) => Promise<SandboxHandle>;
    // ---- end ----
    const c = new Platinum({ url: "http://127.0.0.1:1", token: "t" });
    const fns: [Create, Get, SetTtl, List, Kill] = [
      (i) => c.sandboxes.create(i),
      (id) => c.sandboxes.get(id),
      (id, i) => c.sandboxes.setTtl(id, i),
      (i) => c.sandboxes.list(i),
      (id) => c.sandboxes.kill(id),
    ];
    assert.equal(fns.length, 5);
  });

  test("create, Sandbox object, get, setTtl, list, kill", async () => {
    const [lines, sandbox] = await (async () => {
      let sb!: SandboxHandle;
      const lines = await logged(async () => {
        // ---- sdk reference, create ----
        const sandbox = await client.sandboxes.create({
          template: "python-node",
          ttlMs: 10 * 60 * 1000,
          metadata: { run: "nightly-eval" },
        });

        console.log(sandbox.id, sandbox.status, sandbox.expiresAt);
        // ---- end ----
        sb = sandbox;
      });
      return [lines, sb] as const;
    })();
    const [id, status, expiresAt] = lines[0] ?? [];
    assert.match(String(id), /^sbx_/);
    assert.ok(["creating", "starting", "ready", "running", "idle"].includes(String(status)), `status ${status}`);
    assert.match(String(expiresAt), iso);
    assert.equal(sandbox.ttlMs, 600_000);
    assert.equal(sandbox.ttl_ms, 600_000);
    assert.equal(Date.parse(String(expiresAt)) - Date.parse(sandbox.created_at), 600_000);

    // Sandbox object: the camelCase fields beside the API's.
    await sandbox.waitForState("running", { timeoutMs: 300_000 });
    assert.match(String(sandbox.orgId), /^org_/);
    assert.match(String(sandbox.projectId), /^prj_/);
    assert.equal(sandbox.templateId, "python-node");
    assert.equal(sandbox.templateSlug, "python-node");
    assert.ok((sandbox.templateVersion ?? 0) >= 1);
    assert.match(String(sandbox.templateVersionId), /^tplv_/);
    assert.deepEqual(sandbox.metadata, { run: "nightly-eval" });
    assert.equal(sandbox.destroyedAt, undefined);
    assert.equal(sandbox.destroyedReason, undefined);

    await assert.rejects(async () => {
      const out = await logged(async () => {
        // ---- sdk reference, get ----
        const sandbox = await client.sandboxes.get("sbx_abc123");
        console.log(sandbox.status);
        // ---- end ----
      });
      void out;
    }, NotFoundError);
    const got = await client.sandboxes.get(sandbox.id);
    assert.ok(["ready", "running", "idle"].includes(String(got.status)));

    const ttlLines = await logged(async () => {
      const before = Date.now();
      // ---- sdk reference, setTtl ----
      const updated = await client.sandboxes.setTtl(sandbox.id, {
        ttlMs: 60 * 60 * 1000,
      });

      console.log(updated.expiresAt);
      // ---- end ----
      assert.ok(Math.abs(Date.parse(String(updated.expiresAt)) - (before + 3_600_000)) < 5_000);
    });
    assert.match(String(ttlLines[0]?.[0]), iso);
    await sandbox.setTtl({ ttlMs: 30 * 60 * 1000 });
    assert.equal(sandbox.ttlMs, 1_800_000, "sandbox.setTtl refreshes the handle");

    const runs: string[] = [];
    const orig = SandboxHandleProto.commandsRun(sandbox);
    await (async () => {
      // ---- sdk reference, list ----
      const sandboxes = await client.sandboxes.list();
      for (const sandbox of sandboxes.data) {
        await sandbox.commands.run("python --version");
      }
      // ---- end ----
      runs.push(...sandboxes.data.map((s) => s.id));
    })();
    assert.deepEqual(runs, [sandbox.id]);
    const v = await orig("python --version");
    assert.equal(v.exitCode, 0);
    assert.match(v.stdout + v.stderr, /^Python 3/);

    const killed = await logged(async () => {
      // ---- sdk reference, kill ----
      const destroyed = await client.sandboxes.kill(sandbox.id);
      console.log(destroyed.status, destroyed.destroyedReason);
      // ---- end ----
    });
    assert.deepEqual(killed[0], ["destroyed", "user_killed"]);
    await sandbox.kill();
    assert.equal(sandbox.status, "destroyed", "killing again returns the destroyed record");
    assert.match(String(sandbox.destroyedAt), iso);
  });
});

/** sandbox.commands.run, bound: what the list example calls on each handle. */
const SandboxHandleProto = {
  commandsRun(s: SandboxHandle) {
    return (cmd: string) => s.commands.run(cmd);
  },
};
