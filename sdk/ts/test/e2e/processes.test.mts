// Background processes over the native processes API: streamed output,
// reconnecting, stdin, signals, PTY resize, and that closing a stream
// leaves the process running.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ConflictError, InvalidRequestError, NotFoundError, type Platinum, type SandboxHandle } from "@platinum-dev/sdk";
import { cleanup, freshOrg, running } from "./helpers.mjs";

describe("processes", () => {
  let client: Platinum;
  let s: SandboxHandle;
  before(async () => {
    client = (await freshOrg("ts-proc")).client;
    s = await running(client, "pt-base");
  });
  after(async () => {
    await cleanup(client);
  });

  test("start streams output as it is produced, then the exit", async () => {
    const out: string[] = [];
    const p = await s.processes.start(["sh", "-c", "echo one; while [ ! -e /tmp/p-go ]; do sleep 0.05; done; echo two >&2; exit 4"], {
      onStdout: (d) => out.push("out:" + d),
      onStderr: (d) => out.push("err:" + d),
      tag: "ts-stream",
    });
    assert.ok(p.pid > 0);
    const listed = await s.processes.list();
    assert.ok(listed.some((x) => x.pid === p.pid && x.tag === "ts-stream"), "list shows the running process");
    for await (const ev of p) {
      if (ev.type === "stdout" && ev.data.includes("one")) await s.files.write("/tmp/p-go", "");
      if (ev.type === "exit") break;
    }
    assert.deepEqual(out, ["out:one\n", "err:two\n"]);
    assert.deepEqual(p.exit, { exitCode: 4, timedOut: false });
  });

  test("stdin: sendInput reaches the process, closeStdin ends it", async () => {
    const p = await s.processes.start(["cat"], { stdin: true });
    const got: string[] = [];
    const done = (async () => {
      for await (const ev of p) if (ev.type === "stdout") got.push(ev.data);
    })();
    await p.sendInput("hello\n");
    await p.sendInput(new TextEncoder().encode("bytes\n"));
    await p.closeStdin();
    await done;
    assert.equal(got.join(""), "hello\nbytes\n");
    assert.equal(p.exit?.exitCode, 0);
  });

  test("input to a process without stdin is a ConflictError", async () => {
    const p = await s.processes.start(["sleep", "30"]);
    await assert.rejects(p.sendInput("x"), ConflictError);
    await p.kill();
    const exit = await p.wait();
    assert.notEqual(exit.exitCode, 0);
  });

  test("closing the stream leaves the process running; connect picks its output up again", async () => {
    const p = await s.processes.start(["sh", "-c", "while [ ! -e /tmp/p-next ]; do sleep 0.05; done; echo after; exit 0"]);
    await p.disconnect();
    assert.ok((await s.processes.list()).some((x) => x.pid === p.pid), "still running after the stream closed");
    const again = await s.processes.connect(p.pid);
    await s.files.write("/tmp/p-next", "");
    const lines: string[] = [];
    for await (const ev of again) if (ev.type === "stdout") lines.push(ev.data);
    assert.deepEqual(lines, ["after\n"]);
    assert.equal(again.exit?.exitCode, 0);
    await assert.rejects(s.processes.connect(999999), NotFoundError);
  });

  test("signal: SIGTERM ends a process; an unknown signal is an invalid request", async () => {
    const p = await s.processes.start(["sleep", "60"]);
    await assert.rejects(p.signal("SIGNOPE"), (e: unknown) => e instanceof InvalidRequestError && e.field === "signal");
    await p.signal("SIGTERM");
    const exit = await p.wait();
    assert.notEqual(exit.exitCode, 0);
  });

  test("pty: output as bytes, input through the terminal, resize", async () => {
    const chunks: Uint8Array[] = [];
    const p = await s.processes.start(["sh", "-c", "stty size; read line; echo got:$line; stty size"], {
      pty: { cols: 80, rows: 24 },
      onPty: (d) => chunks.push(d),
    });
    const text = () => new TextDecoder().decode(Buffer.concat(chunks));
    const until = async (re: RegExp) => {
      for (let i = 0; i < 100 && !re.test(text()); i++) await new Promise((r) => setTimeout(r, 50));
    };
    const reading = p.wait();
    await until(/24 80/);
    await p.resize({ cols: 100, rows: 30 });
    await p.sendInput("hi\n");
    await reading;
    assert.match(text(), /24 80/);
    assert.match(text(), /got:hi/);
    assert.match(text(), /30 100/);
    const plain = await s.processes.start(["sleep", "30"]);
    await assert.rejects(plain.resize({ cols: 1, rows: 1 }), ConflictError);
    await plain.kill();
    await plain.wait();
  });
});
