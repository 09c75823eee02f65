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
import { cleanup, freshOrg, rand, running, url } from "./helpers.mjs";

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
    // Each line of the example runs in a wrapper of its own, so the second
    // runs even though the first throws: the placeholder id names no
    // sandbox, and both calls ask ptd, which answers 404 not_found.
    const notFound = (e: unknown) => e instanceof NotFoundError && e.status === 404 && e.code === "not_found";
    await assert.rejects(async () => {
      // ---- sandboxes guide, Get (line 1) ----
      const s = await client.sandboxes.get("sbx_01K…");
      // ---- end ----
      void s;
    }, notFound);
    await assert.rejects(async () => {
      // ---- sandboxes guide, Get (line 2) ----
      const sbx = await client.sandboxes.connect("sbx_01K…");
      // ---- end ----
      void sbx;
    }, notFound);
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

// ---- sdk reference, create / get / setTtl / list / kill signatures ----
interface SandboxesReference {
create(input?: CreateSandboxInput): Promise<SandboxHandle>
get(sandboxId: `sbx_${string}`): Promise<SandboxHandle>
setTtl(
  sandboxId: `sbx_${string}`,
  input: { ttlMs: number; idempotencyKey?: string },
): Promise<SandboxHandle>
list(input?: ListSandboxesInput): Promise<ListSandboxHandlesResponse>
kill(sandboxId: `sbx_${string}`): Promise<SandboxHandle>
}
// ---- end ----

/** An exec answer as ptd sent it, recorded by {@link execRecordingClient}. */
interface ExecAnswer {
  sandboxId: string;
  status: number;
  body: { exit_code: number; stdout: string; stderr: string };
}

/**
 * A client whose fetch keeps every exec answer, so a test can check what
 * the calls of an example returned without changing the example.
 */
function execRecordingClient(token: string): { client: Platinum; execs: ExecAnswer[] } {
  const execs: ExecAnswer[] = [];
  const f: typeof fetch = async (input, init) => {
    const res = await fetch(input, init);
    const m = /^\/v1\/sandboxes\/([^/]+)\/exec$/.exec(new URL(String(input)).pathname);
    if (m) execs.push({ sandboxId: decodeURIComponent(m[1]!), status: res.status, body: (await res.clone().json()) as ExecAnswer["body"] });
    return res;
  };
  return { client: new Platinum({ url, token, fetch: f }), execs };
}

describe("sdk reference (client.sandboxes)", () => {
  let client: Platinum;
  let token: string;
  before(async () => {
    ({ client, token } = await freshOrg("ts-ref"));
  });
  after(async () => {
    await cleanup(client);
  });

  test("signatures: client.sandboxes is the reference's create / get / setTtl / list / kill", async () => {
    // The assignment is the check: tsc (strict) rejects it when a method's
    // parameters or result stop matching the reference's signatures. Each
    // call below then goes through the reference's types to a real ptd.
    const sandboxes: SandboxesReference = client.sandboxes;
    const made = await sandboxes.create({ template: "busybox", ttlMs: 120_000, metadata: { signatures: "yes" } });
    assert.match(made.id, /^sbx_/);
    assert.equal(made.ttlMs, 120_000);
    const id = made.id as `sbx_${string}`;
    const got = await sandboxes.get(id);
    assert.equal(got.id, id);
    assert.deepEqual(got.metadata, { signatures: "yes" });
    const before = Date.now();
    const ttl = await sandboxes.setTtl(id, { ttlMs: 300_000, idempotencyKey: "ts-sig-" + rand() });
    assert.equal(ttl.ttlMs, 300_000);
    assert.ok(Math.abs(Date.parse(String(ttl.expiresAt)) - (before + 300_000)) < 5_000, `expiresAt ${ttl.expiresAt}`);
    const listed = await sandboxes.list({ metadata: { signatures: "yes" } });
    assert.deepEqual(listed.data.map((h) => h.id), [id]);
    assert.deepEqual(listed.rows.map((r) => r.id), [id]);
    assert.equal(typeof listed.data[0]!.commands.run, "function", "list's data are handles");
    const killed = await sandboxes.kill(id);
    assert.equal(killed.status, "destroyed");
    assert.equal(killed.destroyedReason, "user_killed");
    assert.deepEqual((await sandboxes.list({ metadata: { signatures: "yes" } })).data, [], "a destroyed sandbox is not listed");
  });

  test("create, Sandbox object, create inputs, get, setTtl, list, kill", async () => {
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

    // The other create inputs of the reference: templateVersionId pins the
    // version the first sandbox booted (no slug given), projectId puts the
    // sandbox in another project of the org, idempotencyKey names the create.
    const project = await client.projects.create({ name: "ts-ref-" + rand() });
    assert.match(project.id, /^prj_/);
    assert.notEqual(project.id, sandbox.projectId);
    const key = "ts-ref-create-" + rand();
    const pinned = await client.sandboxes.create(
      { templateVersionId: sandbox.templateVersionId, projectId: project.id, idempotencyKey: key },
      { waitForRunning: true, timeoutMs: 300_000 },
    );
    assert.equal(pinned.templateVersionId, sandbox.templateVersionId);
    assert.equal(pinned.template_version_id, sandbox.templateVersionId);
    assert.equal(pinned.templateSlug, "python-node");
    assert.equal(pinned.projectId, project.id);
    assert.equal(pinned.project_id, project.id);
    assert.equal((await client.sandboxes.get(pinned.id)).projectId, project.id, "the server recorded the project");
    assert.deepEqual((await client.sandboxes.list({ projectId: project.id })).rows.map((r) => r.id), [pinned.id]);
    const again = await client.sandboxes.create(
      { templateVersionId: sandbox.templateVersionId, projectId: project.id, idempotencyKey: key },
      { waitForRunning: true, timeoutMs: 300_000 },
    );
    assert.equal(again.id, pinned.id, "the same idempotencyKey returns the first create's sandbox");

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

    // The list example runs with a client that records each exec answer,
    // so the results of the loop's own commands.run calls are checked.
    const rec = execRecordingClient(token);
    const listed = await (async (client: Platinum) => {
      // ---- sdk reference, list ----
      const sandboxes = await client.sandboxes.list();
      for (const sandbox of sandboxes.data) {
        await sandbox.commands.run("python --version");
      }
      // ---- end ----
      return sandboxes.data.map((s) => s.id);
    })(rec.client);
    assert.deepEqual(new Set(listed), new Set([sandbox.id, pinned.id]), "the org's two live sandboxes");
    assert.deepEqual(rec.execs.map((e) => e.sandboxId), listed, "one commands.run per listed sandbox, in order");
    for (const e of rec.execs) {
      assert.equal(e.status, 200);
      assert.equal(e.body.exit_code, 0, `python --version in ${e.sandboxId}: ${JSON.stringify(e.body)}`);
      assert.match(e.body.stdout + e.body.stderr, /^Python 3\.\d+/);
    }

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
    await pinned.kill();
  });
});
