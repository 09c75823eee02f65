"""The real `e2b` Python SDK (pinned in requirements.txt) through one
region's ptd, with sandboxes in two regions: run by tests/e2e's
TestRegions (beside regions.mjs, with the same environment: E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY at region a, REGIONS_WANT the JSON list of
every sandbox's id, REGIONS_B_ID one that lives in region b)."""

import json
import os

from e2b import Sandbox

want = json.loads(os.environ["REGIONS_WANT"])
b_id = os.environ["REGIONS_B_ID"]

# The list's pages, two at a time, hold both regions' sandboxes once.
seen = []
pages = Sandbox.list(limit=2)
while pages.has_next:
    seen += [s.sandbox_id for s in pages.next_items()]
assert sorted(seen) == sorted(want), (seen, want)

# b's sandbox through a: connect, a file read through envd, its timeout.
sbx = Sandbox.connect(b_id)
assert sbx.files.read("/etc/hostname").strip(), "hostname read through envd"
sbx.set_timeout(600)
assert sbx.get_info().sandbox_id == b_id
print(f"e2b python sdk through region a: {len(seen)} sandboxes listed, {b_id} of region b reached")
