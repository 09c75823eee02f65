// The TypeScript SDK's runner for `go run ./bench/sdk`: create (wait for
// running) → exec `true` → delete through @platinum-dev/sdk (sdk/ts's
// build). Between runs it waits (untimed) until the deleted sandbox is
// torn down, so runs never overlap a teardown. Protocol: runner.mjs.
import { Platinum } from "../../sdk/ts/dist/esm/index.js";
import { main } from "./runner.mjs";

const client = new Platinum({ pollIntervalMs: 20 });

await main("ts", async (template) => {
  const t0 = performance.now();
  const sbx = await client.sandboxes.create({ template }, { waitForRunning: true });
  const t1 = performance.now();
  const r = await sbx.exec(["true"]);
  const t2 = performance.now();
  if (r.exitCode !== 0) throw new Error(`true exited ${r.exitCode}`);
  await sbx.delete();
  const t3 = performance.now();
  await client.sandboxes.waitForState(sbx.id, "deleted");
  return { total_ms: t3 - t0, create_ms: t1 - t0, exec_ms: t2 - t1, delete_ms: t3 - t2 };
}, (id) => client.sandboxes.get(id));
