// Run code through the SDK against a code-interpreter sandbox: state
// across cells, rich results, a cell's error as data, output streamed to
// the callbacks before the cell ends, the cell's own timeout, contexts
// that do not share state, and a refused call that throws.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { InvalidRequestError, NotFoundError, type Platinum, type Result, type SandboxHandle } from "@platinum-dev/sdk";
import { cleanup, freshOrg, running } from "./helpers.mjs";

describe("runCode", () => {
  let client: Platinum;
  let s: SandboxHandle;
  before(async () => {
    client = (await freshOrg("ts-code")).client;
    s = await running(client, "code-interpreter");
  });
  after(async () => {
    await cleanup(client);
  });

  test("state persists across cells of the default context", async () => {
    await s.runCode("x = 41");
    const ex = await s.runCode("x + 1");
    assert.equal(ex.text, "42");
    assert.equal(ex.error, undefined);
    assert.equal(ex.status, "ok");
    assert.ok((ex.executionCount ?? 0) >= 2);
    assert.equal(ex.contextId, "ctx_default_python");
  });

  test("a matplotlib figure is a PNG result; a DataFrame is HTML", async () => {
    const seen: Result[] = [];
    const ex = await s.runCode("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()", { onResult: (r) => seen.push(r) });
    const png = ex.results.find((r) => r.png)?.bytes("image/png");
    assert.ok(png && png.length > 100, "a PNG came back");
    assert.deepEqual([...png.subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
    assert.equal(seen.length, ex.results.length, "onResult saw every result");
    const df = await s.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2]})");
    assert.match(df.results.find((r) => r.isMainResult)?.html ?? "", /<table/);
  });

  test("an exception is the execution's error, and the context still works", async () => {
    const errs: string[] = [];
    const ex = await s.runCode("1/0", { onError: (e) => errs.push(e.name) });
    assert.equal(ex.error?.name, "ZeroDivisionError");
    assert.match(ex.error?.traceback ?? "", /ZeroDivisionError/);
    assert.deepEqual(errs, ["ZeroDivisionError"]);
    assert.equal((await s.runCode("x")).text, "41");
  });

  test("stdout reaches onStdout before the cell ends", async () => {
    const t0 = Date.now();
    let first = 0;
    const ex = await s.runCode("import time\nprint('one', flush=True)\ntime.sleep(1.5)\nprint('two')", {
      onStdout: () => {
        if (!first) first = Date.now();
      },
    });
    assert.equal(ex.logs.stdout.join(""), "one\ntwo\n");
    assert.ok(first > 0 && Date.now() - first >= 1000, `the first line came ${first - t0} ms in, before the sleep ended`);
  });

  test("cellTimeoutMs interrupts the cell and keeps the context", async () => {
    const ex = await s.runCode("while True: pass", { cellTimeoutMs: 2000 });
    assert.equal(ex.error?.name, "TimeoutError");
    assert.equal(ex.status, "timeout");
    assert.equal((await s.runCode("x * 2")).text, "82");
  });

  test("contexts keep their own state; javascript keeps its own", async () => {
    await s.runCode("only_in_default = 1");
    assert.equal((await s.runCode("only_in_default")).text, "1");
    const c = await s.codeContexts.create({ language: "python" });
    assert.match(c.id, /^ctx_/);
    const ex = await s.runCode("'only_in_default' in globals()", { context: c });
    assert.equal(ex.text, "False");
    await s.runCode("only_in_ctx = 2", { context: c });
    assert.equal((await s.runCode("'only_in_ctx' in globals()")).text, "False");
    assert.ok((await s.codeContexts.list()).some((x) => x.id === c.id));
    await s.runCode("y = 5", { context: c.id });
    await s.codeContexts.restart(c);
    assert.equal((await s.runCode("'y' in globals()", { context: c })).text, "False");
    await s.codeContexts.delete(c);
    await assert.rejects(s.runCode("1", { context: c }), NotFoundError);
    await s.runCode("let n = 20", { language: "javascript" });
    assert.equal((await s.runCode("n + 1", { language: "javascript" })).text, "21");
  });

  test("env applies to one cell; a bad language is an InvalidRequestError", async () => {
    const ex = await s.runCode("import os\nos.environ.get('TS_CELL')", { env: { TS_CELL: "yes" } });
    assert.equal(ex.text, "'yes'");
    assert.equal((await s.runCode("import os\nstr(os.environ.get('TS_CELL'))")).text, "'None'");
    await assert.rejects(s.runCode("1", { language: "cobol" as never }), InvalidRequestError);
  });
});
