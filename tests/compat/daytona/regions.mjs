// The real Daytona SDK (@daytonaio/sdk, pinned in package-lock.json)
// through one region's ptd, with sandboxes in two regions. Run by
// tests/e2e's TestRegions (not a *.test.mjs: it needs two regions, which
// daytona_test.go's one ptd is not) with DAYTONA_API_URL and
// DAYTONA_API_KEY pointing at region a, REGIONS_WANT the JSON list of
// every sandbox's id, REGIONS_B_ID one that lives in region b, and
// REGIONS_B the name of region b.
import assert from 'node:assert/strict';
import { Daytona } from '@daytonaio/sdk';

const want = JSON.parse(process.env.REGIONS_WANT);
const bID = process.env.REGIONS_B_ID;
const daytona = new Daytona({ apiUrl: process.env.DAYTONA_API_URL, apiKey: process.env.DAYTONA_API_KEY });

// list's pages, two at a time, hold both regions' sandboxes once.
const seen = [];
for await (const s of daytona.list({ limit: 2 })) seen.push(s.id);
assert.deepEqual([...seen].sort(), [...want].sort());

// get of b's sandbox through a, then a file read through its toolbox.
const sb = await daytona.get(bID);
assert.equal(sb.id, bID);
const hostname = (await sb.fs.downloadFile('/etc/hostname')).toString();
assert.ok(hostname.trim().length > 0, 'hostname read through the toolbox');
assert.equal(sb.target, process.env.REGIONS_B, "the sandbox's target is its region");

// A client whose target is region b, through a, makes its sandbox in b:
// only b's list has it.
const inB = new Daytona({ apiUrl: process.env.DAYTONA_API_URL, apiKey: process.env.DAYTONA_API_KEY, target: process.env.REGIONS_B });
const made = await inB.create({ image: 'busybox', autoStopInterval: 0 });
try {
  assert.equal(made.target, process.env.REGIONS_B);
  const inRegion = [];
  for await (const s of daytona.list({ targets: [process.env.REGIONS_B] })) inRegion.push(s);
  assert.ok(inRegion.some((s) => s.id === made.id), 'listed with target b');
  assert.ok(inRegion.every((s) => s.target === process.env.REGIONS_B), 'a target filter keeps its region');
} finally {
  await made.delete();
}
console.log(`daytona sdk through region a: ${seen.length} sandboxes listed, ${bID} of region b reached, ${made.id} made in b by target`);
// The SDK keeps connections open; the checks are done.
process.exit(0);
