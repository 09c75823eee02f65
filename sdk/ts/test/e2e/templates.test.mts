// The org's own templates through the SDK (docs/templates.md): a build
// context uploaded as a tar, a Dockerfile build followed line by line, the
// version it made, a sandbox from it, deletes refused while in use, and
// registry credentials that never come back.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ConflictError, type BuildLogLine, type Platinum } from "@platinum-dev/sdk";
import { cleanup, freshOrg, rand } from "./helpers.mjs";

/** A ustar archive of regular files (what `tar` writes, enough for a build context). */
function tarOf(files: Record<string, string>): Uint8Array {
  const blocks: Uint8Array[] = [];
  const enc = new TextEncoder();
  for (const [name, text] of Object.entries(files)) {
    const body = enc.encode(text);
    const h = new Uint8Array(512);
    const put = (off: number, s: string) => h.set(enc.encode(s), off);
    const oct = (off: number, len: number, n: number) => put(off, n.toString(8).padStart(len - 1, "0") + "\0");
    put(0, name);
    oct(100, 8, 0o644);
    oct(108, 8, 0);
    oct(116, 8, 0);
    oct(124, 12, body.length);
    oct(136, 12, 1700000000);
    put(148, "        ");
    put(156, "0");
    put(257, "ustar\0");
    put(263, "00");
    let sum = 0;
    for (const b of h) sum += b;
    put(148, sum.toString(8).padStart(6, "0") + "\0 ");
    blocks.push(h, body, new Uint8Array((512 - (body.length % 512)) % 512));
  }
  blocks.push(new Uint8Array(1024));
  const out = new Uint8Array(blocks.reduce((n, b) => n + b.length, 0));
  let off = 0;
  for (const b of blocks) {
    out.set(b, off);
    off += b.length;
  }
  return out;
}

describe("templates", () => {
  let client: Platinum;
  const slug = `ts-tpl-${rand()}`;
  before(async () => {
    client = (await freshOrg("ts-tpl")).client;
  });
  after(async () => {
    await cleanup(client);
    await client.templates.delete(slug).catch(() => {});
  });

  test("a Dockerfile build from an uploaded context makes a version sandboxes run", async () => {
    const up = await client.templates.uploadContext(tarOf({ "hello.txt": "hello from the context\n" }));
    assert.match(up.id, /^tupl_/);
    const b = await client.templates.create({
      slug,
      dockerfile: "FROM busybox\nCOPY hello.txt /srv/\nRUN echo built >> /srv/hello.txt\nENV WHO=ts\nWORKDIR /srv\n",
      context_upload_id: up.id,
      settings: { env: { FROM_SETTINGS: "yes" } },
    });
    assert.equal(b.status, "running");
    const lines: BuildLogLine[] = [];
    const done = await client.templates.wait(slug, b.id, { onLine: (l) => lines.push(l) });
    assert.equal(done.status, "ready", JSON.stringify(lines));
    assert.ok(done.version_id?.startsWith("tplv_"));
    assert.equal(lines.at(-1)?.type, "done");
    assert.deepEqual(lines.filter((l) => l.type === "step").map((l) => l.line), [2, 3, 4, 5]);

    // The log again, from line 2 on, without following.
    const again: BuildLogLine[] = [];
    for await (const l of client.templates.logs(slug, b.id, { since: 2 })) again.push(l);
    assert.equal(again[0]?.seq, 3);
    assert.equal(again.length, lines.length - 2);

    const versions = await client.templates.versions(slug);
    assert.equal(versions.length, 1);
    assert.equal(versions[0]?.id, done.version_id);

    const s = await client.sandboxes.create({ template: slug }, { waitForRunning: true, timeoutMs: 300_000 });
    const r = await s.exec(["sh", "-c", 'pwd; cat hello.txt; echo "$WHO $FROM_SETTINGS"']);
    assert.equal(r.stdout, "/srv\nhello from the context\nbuilt\nts yes\n");

    // The version a sandbox runs cannot be deleted.
    await assert.rejects(client.templates.delete(slug), (e: unknown) => e instanceof ConflictError && e.code === "template_in_use");
    await s.delete();
  });

  test("a failing RUN names its step, line and exit code and makes no version", async () => {
    const failing = `${slug}-fail`;
    const b = await client.templates.create({ slug: failing, dockerfile: "FROM busybox\nENV A=1\nRUN exit 5\n" });
    const done = await client.templates.wait(failing, b.id);
    assert.equal(done.status, "failed");
    assert.deepEqual([done.failure?.step, done.failure?.line, done.failure?.exit_code], [2, 3, 5]);
    assert.equal(done.version_id, null);
  });

  test("registry credentials are stored, listed without the secret, and removed", async () => {
    const host = `registry-${rand()}.example.com`;
    const c = await client.templates.setRegistryCredential(host, { username: "bot", password: "ts-secret-pass" });
    assert.deepEqual([c.registry, c.username, c.kind], [host, "bot", "basic"]);
    const list = await client.templates.registryCredentials();
    assert.ok(list.some((x) => x.registry === host));
    assert.ok(!JSON.stringify(list).includes("ts-secret-pass"));
    await client.templates.deleteRegistryCredential(host);
    assert.ok(!(await client.templates.registryCredentials()).some((x) => x.registry === host));
  });
});
