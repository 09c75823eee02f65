#!/usr/bin/env python3
"""The Python SDK's runner for the SDK benchmarks: create (wait for
running) → exec ``true`` → delete, N times, through the ``platinum``
package (run it with sdk/python/.venv's python).

It takes the runner flags every SDK's runner takes (``-n``, ``-t``,
``--warmup``) and PT_API_URL / PT_TOKEN, and prints one JSON object of
per-run timings::

    {"client":"py","runs":[{"total_ms":…,"create_ms":…,"exec_ms":…,"delete_ms":…},…]}

With ``--serve`` it runs one timed iteration per line read from stdin and
prints each as a JSON line instead ({"ms": …, "create_ms": …, …}), so a
harness can alternate SDKs iteration by iteration (go run ./bench/sdk,
go run ./bench/sdk/python); a line ``get ID N`` instead times N reads of
sandbox ID, answered ``{"get_ms": […]}``. After each delete it waits, untimed, until the
sandbox is torn down, so no run overlaps a teardown.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from platinum import Platinum


def iteration(client: Platinum, template: str) -> dict[str, float]:
    t0 = time.perf_counter()
    sbx = client.sandboxes.create(template=template, wait_for_running=True, timeout=300)
    t1 = time.perf_counter()
    if sbx.exec(["true"]).exit_code != 0:
        raise SystemExit("exec true failed")
    t2 = time.perf_counter()
    sbx.delete()
    t3 = time.perf_counter()
    client.sandboxes.wait_for_state(sbx.id, "deleted", timeout=120)
    return {"total_ms": (t3 - t0) * 1000, "create_ms": (t1 - t0) * 1000, "exec_ms": (t2 - t1) * 1000,
            "delete_ms": (t3 - t2) * 1000}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50, help="timed runs")
    ap.add_argument("-t", "--template", default="busybox")
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs first (connection, imports)")
    ap.add_argument("--serve", action="store_true", help="one run per stdin line, printed as a JSON line")
    args = ap.parse_args()
    with Platinum(poll_interval=0.02) as client:
        for _ in range(args.warmup):
            iteration(client, args.template)
        if args.serve:
            for line in sys.stdin:
                words = line.split()
                if words and words[0] == "get":
                    # "get ID N": N reads of one sandbox, each timed alone.
                    ms = []
                    for _ in range(int(words[2])):
                        t0 = time.perf_counter()
                        client.sandboxes.get(words[1])
                        ms.append((time.perf_counter() - t0) * 1000)
                    print(json.dumps({"get_ms": ms}), flush=True)
                    continue
                r = iteration(client, args.template)
                print(json.dumps({"ms": r["total_ms"], **r}), flush=True)
            return 0
        runs = [iteration(client, args.template) for _ in range(args.n)]
    print(json.dumps({"client": "py", "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
