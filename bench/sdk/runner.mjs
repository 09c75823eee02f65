// The runner protocol of `go run ./bench/sdk`, shared by the node runners.
// A runner gets `-t TEMPLATE --warmup W` and PT_API_URL / PT_TOKEN, runs W
// untimed warm-up iterations, then either
//   -n N:     runs N iterations and prints one JSON line
//             {"client":NAME,"runs":[{"total_ms","create_ms","exec_ms","delete_ms"},…]}, or
//   --serve:  runs one iteration per empty line read on stdin and answers
//             each with one JSON line {"ms","total_ms","create_ms","exec_ms","delete_ms"}
//             ("ms" is total_ms), until stdin closes: the bench keeps one
//             process per client, so it stays warm like the Go client. A line
//             "get ID N" reads sandbox ID N times through the client and is
//             answered {"get_ms":[…]}: one round trip each, the client's own
//             cost beside a server that answers in microseconds.
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";

export async function main(client, once, get) {
  const { values: args } = parseArgs({
    options: {
      n: { type: "string", short: "n", default: "50" },
      template: { type: "string", short: "t", default: "busybox" },
      warmup: { type: "string", default: "1" },
      serve: { type: "boolean", default: false },
    },
  });
  for (let i = 0; i < Number(args.warmup); i++) await once(args.template);
  if (!args.serve) {
    const runs = [];
    for (let i = 0; i < Number(args.n); i++) runs.push(await once(args.template));
    process.stdout.write(JSON.stringify({ client, runs }) + "\n");
    return;
  }
  for await (const line of createInterface({ input: process.stdin })) {
    const [verb, id, n] = line.trim().split(/\s+/);
    if (verb === "get") {
      const ms = [];
      for (let i = 0; i < Number(n); i++) {
        const t0 = performance.now();
        await get(id);
        ms.push(performance.now() - t0);
      }
      process.stdout.write(JSON.stringify({ get_ms: ms }) + "\n");
      continue;
    }
    const r = await once(args.template);
    process.stdout.write(JSON.stringify({ ms: r.total_ms, ...r }) + "\n");
  }
}
