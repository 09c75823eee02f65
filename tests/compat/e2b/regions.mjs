// The real e2b SDK (package.json pins it) through one region's ptd, with
// sandboxes in two regions. Run by tests/e2e's TestRegions (not a
// *.test.mjs: it needs two regions, which TestSDK's one ptd is not) with
// E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at region a,
// REGIONS_WANT the JSON list of every sandbox's id in list order,
// REGIONS_B_ID one that lives in region b, and REGIONS_SNAPS the JSON
// list of the snapshots of sandboxes in both regions, newest first.
import assert from 'node:assert/strict'
import { Sandbox } from 'e2b'

const want = JSON.parse(process.env.REGIONS_WANT)
const bID = process.env.REGIONS_B_ID

// The list paginator, two at a time, walks both regions' sandboxes once,
// in order: its nextToken goes on across regions.
const seen = []
const pages = Sandbox.list({ limit: 2 })
while (pages.hasNext) {
  const items = await pages.nextItems()
  assert.ok(items.length <= 2, `a page of ${items.length}`)
  seen.push(...items.map((s) => s.sandboxId))
}
assert.deepEqual(seen, want)

// connect, envd's file read, setTimeout and getInfo of b's sandbox, all
// through a.
// The snapshot paginator, one at a time, walks both regions' snapshots
// once, newest first; those of b's sandbox are listed through a too.
const wantSnaps = JSON.parse(process.env.REGIONS_SNAPS ?? '[]')
const snaps = []
const snapPages = Sandbox.listSnapshots({ limit: 1 })
while (snapPages.hasNext) {
  const items = await snapPages.nextItems()
  assert.ok(items.length <= 1, `a snapshot page of ${items.length}`)
  snaps.push(...items.map((s) => s.snapshotId))
}
assert.deepEqual(snaps, wantSnaps)
const ofB = []
const bPages = Sandbox.listSnapshots({ sandboxId: bID })
while (bPages.hasNext) {
  ofB.push(...(await bPages.nextItems()).map((s) => s.snapshotId))
}
assert.equal(ofB.length, 2, `b's sandbox's snapshots through a: ${ofB}`)
assert.ok(ofB.every((id) => wantSnaps.includes(id)), `b's sandbox's snapshots through a: ${ofB}`)

const sbx = await Sandbox.connect(bID)
const hostname = await sbx.files.read('/etc/hostname')
assert.ok(hostname.trim().length > 0, 'hostname read through a')
await sbx.setTimeout(1_200_000)
const info = await Sandbox.getInfo(bID)
assert.equal(info.sandboxId, bID)
assert.ok(info.endAt.getTime() - Date.now() > 15 * 60_000, `endAt ${info.endAt.toISOString()} after setTimeout(20 min)`)
console.log(`e2b sdk through region a: ${seen.length} sandboxes listed, ${bID} of region b reached`)
