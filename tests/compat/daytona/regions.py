"""The real `daytona` Python SDK (pinned in requirements.txt) through one
region's ptd, with sandboxes in two regions: run by tests/e2e's
TestRegions (beside regions.mjs, with the same environment:
DAYTONA_API_URL and DAYTONA_API_KEY at region a, REGIONS_WANT the JSON list
of every sandbox's id, REGIONS_B_ID one that lives in region b, REGIONS_B
region b's name)."""

import json
import os

from daytona import CreateSandboxFromSnapshotParams, Daytona, DaytonaConfig, ListSandboxesQuery

want = json.loads(os.environ["REGIONS_WANT"])
b_id, b = os.environ["REGIONS_B_ID"], os.environ["REGIONS_B"]
daytona = Daytona()  # DAYTONA_API_URL and DAYTONA_API_KEY from the environment

# The list's pages, two at a time, hold both regions' sandboxes once.
seen = [s.id for s in daytona.list(ListSandboxesQuery(limit=2))]
assert sorted(seen) == sorted(want), (seen, want)

# b's sandbox through a, and a file read through its toolbox.
sb = daytona.get(b_id)
assert sb.id == b_id and sb.target == b, (sb.id, sb.target)
assert sb.fs.download_file("/etc/hostname").strip(), "hostname read through the toolbox"

# A client whose target is b, through a, makes its sandbox in b.
in_b = Daytona(DaytonaConfig(api_url=os.environ["DAYTONA_API_URL"], api_key=os.environ["DAYTONA_API_KEY"], target=b))
made = in_b.create(CreateSandboxFromSnapshotParams(snapshot="busybox", auto_stop_interval=0))
try:
    assert made.target == b, made.target
    listed = list(daytona.list(ListSandboxesQuery(targets=[b])))
    assert made.id in [s.id for s in listed], "listed with target b"
    assert all(s.target == b for s in listed), "a target filter keeps its region"
finally:
    daytona.delete(made)
print(f"daytona python sdk through region a: {len(seen)} sandboxes listed, {b_id} of region b reached, {made.id} made in b by target")
