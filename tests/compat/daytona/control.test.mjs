// Control-plane routes through the real Daytona SDK (lib.mjs): snapshots
// and fork, recover from the error state, public previews, egress
// policies (against addresses daytona_test.go serves from a network
// namespace it makes), image and user at create, list paging and filters,
// TTL, 429 and the toolbox proxy URL.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { renameSync, rmSync, truncateSync, statSync, writeFileSync } from 'node:fs';
import { sdk, apiKey, daytona, create, track, sleep, sh, api, deadline, uniq } from './lib.mjs';

const { DaytonaNotFoundError, DaytonaConflictError, DaytonaRateLimitError, DaytonaForbiddenError } = sdk;

test('snapshots: the templates are general snapshots', async () => {
  const all = await daytona.snapshot.list();
  const byName = Object.fromEntries(all.items.map((s) => [s.name, s]));
  for (const t of ['busybox', 'python-node', 'code-interpreter']) {
    assert.equal(byName[t]?.general, true, t);
    assert.equal(byName[t].state, 'active', t);
    assert.ok(byName[t].size > 0, t);
  }
  assert.equal(all.total, all.items.length);
  const page = await daytona.snapshot.list(2, 1);
  assert.equal(page.items.length, 1);
  assert.equal(page.page, 2);
  assert.equal(page.totalPages, page.total, 'one snapshot a page');
  assert.ok(page.total >= 3);
  const bb = await daytona.snapshot.get('busybox');
  assert.equal(bb.id, 'busybox');
  assert.equal(bb.general, true);
  await assert.rejects(daytona.snapshot.get('no-such-snapshot'), DaytonaNotFoundError);
  await assert.rejects(daytona.snapshot.delete('busybox'), DaytonaForbiddenError);
  await assert.rejects(daytona.snapshot.create({ name: 'from-image', image: 'python:3.12' }), (e) => e.statusCode === 400);
});

test('createSnapshot, a create from it, and delete', async () => {
  const name = uniq('snap');
  const src = await create({ snapshot: 'busybox', labels: { role: 'source' } });
  await src.fs.uploadFile(Buffer.from('in the snapshot'), '/root/data.txt');
  await src.createSnapshot(name);
  assert.equal(src.state, 'started', 'the source keeps running');
  await assert.rejects(src.createSnapshot(name), DaytonaConflictError);
  await assert.rejects(src.createSnapshot('busybox'), DaytonaConflictError);
  await src.fs.uploadFile(Buffer.from('after the snapshot'), '/root/data.txt');

  const snap = await daytona.snapshot.get(name);
  assert.match(snap.id, /^snap_/);
  assert.equal(snap.name, name);
  assert.equal(snap.general, false);
  assert.equal(snap.state, 'active');
  assert.equal(snap.sourceSandboxId, src.id);
  assert.equal(snap.imageName, 'busybox');
  const listed = await daytona.snapshot.list({ sourceSandboxId: src.id });
  assert.deepEqual(listed.items.map((s) => s.name), [name]);

  const clone = track(await daytona.create({ snapshot: name, autoStopInterval: 0 }));
  assert.equal(clone.state, 'started');
  assert.equal(clone.snapshot, name);
  assert.equal((await clone.fs.downloadFile('/root/data.txt')).toString(), 'in the snapshot');
  assert.equal((await src.fs.downloadFile('/root/data.txt')).toString(), 'after the snapshot');

  await daytona.snapshot.delete(name);
  await assert.rejects(daytona.snapshot.get(name), DaytonaNotFoundError);
  await assert.rejects(daytona.create({ snapshot: name }), DaytonaNotFoundError);
  assert.equal((await clone.fs.downloadFile('/root/data.txt')).toString(), 'in the snapshot', 'the clone outlives its snapshot');
});

test('fork: a running copy of a started sandbox, a child of it', async () => {
  const src = await create({ snapshot: 'busybox', labels: { role: 'parent' }, envVars: { FROM: 'parent' } });
  await src.fs.uploadFile(Buffer.from('forked state'), '/root/state.txt');
  const name = uniq('fork');
  const fork = track(await src.fork({ name }));
  assert.equal(fork.state, 'started');
  assert.equal(fork.name, name);
  assert.notEqual(fork.id, src.id);
  assert.equal(fork.labels.role, 'parent');
  assert.equal((await fork.fs.downloadFile('/root/state.txt')).toString(), 'forked state');
  assert.equal(await sh(fork, 'echo $FROM'), 'parent');
  await fork.fs.uploadFile(Buffer.from('changed in the fork'), '/root/state.txt');
  assert.equal((await src.fs.downloadFile('/root/state.txt')).toString(), 'forked state', 'the copies are independent');
  await assert.rejects(src.delete(), (e) => e.statusCode === 400 && /child/i.test(e.message), 'a source with a live fork is not deleted');
  await fork.delete();
  for (const end = deadline(); Date.now() < end;) { // the fork's teardown runs in the background
    try { await src.delete(); break; } catch { await sleep(100); }
  }
  await assert.rejects(daytona.get(src.id), DaytonaNotFoundError);
  const stopped = await create({ snapshot: 'busybox' });
  await stopped.stop();
  await assert.rejects(stopped.fork(), (e) => e.statusCode === 400);
});

test('error state and recover', async () => {
  const sb = await create({ snapshot: 'busybox' });
  await sb.fs.uploadFile(Buffer.from('survives the failure'), '/root/keep.txt');
  // A stop that keeps no memory unmounts the disk; then the host's disk
  // image is swapped for one with no filesystem, so the next boot fails.
  const r = await fetch(`${process.env.PT_API_URL}/v1/sandboxes/${sb.id}/stop?memory=false&wait_for_state=stopped`, {
    method: 'POST', headers: { Authorization: `Bearer ${apiKey}` },
  });
  assert.equal(r.status, 200, await r.text());
  // find's exit status is ignored: other sandboxes' directories vanish
  // under it as their teardowns run.
  const img = spawnSync('find', [process.env.PT_DATA_DIR, '-path', `*/images/${sb.id}.img`], { encoding: 'utf8' }).stdout.trim();
  assert.ok(img, 'the disk image');
  const size = statSync(img).size;
  renameSync(img, `${img}.aside`);
  try {
    writeFileSync(img, '');
    truncateSync(img, size); // the right size, all zeros: no filesystem to mount
    await sb.refreshData();
    await assert.rejects(sb.start(), (e) => e instanceof sdk.DaytonaError && /error/.test(e.message));
    await sb.refreshData();
    assert.equal(sb.state, 'error');
    assert.ok(sb.errorReason, 'errorReason says why');
    assert.equal(sb.recoverable, true);
    const errored = [];
    for await (const s of daytona.list({ states: ['error'] })) errored.push(s.id);
    assert.ok(errored.includes(sb.id), 'listed by state error');
  } finally {
    rmSync(img, { force: true });
    renameSync(`${img}.aside`, img);
  }
  await sb.recover();
  assert.equal(sb.state, 'started');
  assert.equal((await sb.fs.downloadFile('/root/keep.txt')).toString(), 'survives the failure');
  await assert.rejects(sb.recover(), (e) => e.statusCode === 400 && /not in an error state/.test(e.message));
});

test('toolbox-proxy-url answers the URL every DTO carries', async () => {
  const sb = await create({ snapshot: 'busybox' });
  const r = await api('GET', `/sandbox/${sb.id}/toolbox-proxy-url`);
  assert.equal(r.status, 200);
  assert.equal(r.body.url, sb.toolboxProxyUrl);
  assert.equal(new URL(r.body.url).pathname, '/daytona/toolbox');
  assert.equal((await api('GET', '/sandbox/no-such/toolbox-proxy-url')).status, 404);
});

test('public: true serves previews without a token; public/false takes it back', async () => {
  const sb = await create({ public: true });
  assert.equal(sb.public, true);
  await sb.fs.uploadFile(Buffer.from('public page'), '/tmp/www/index.html');
  await sb.process.createSession('web');
  await sb.process.executeSessionCommand('web', { command: 'cd /tmp/www && python3 -m http.server 8081', runAsync: true });
  const link = await sb.getPreviewLink(8081);
  let status = 0;
  let text = '';
  for (const end = deadline(); Date.now() < end && status !== 200;) {
    const r = await fetch(link.url); // no token
    status = r.status;
    text = await r.text();
    if (status !== 200) await sleep(100);
  }
  assert.equal(status, 200);
  assert.equal(text, 'public page');
  assert.equal((await api('POST', `/sandbox/${sb.id}/public/false`)).status, 200);
  assert.equal((await daytona.get(sb.id)).public, false);
  assert.equal((await fetch(link.url)).status, 401);
  const priv = await create({ snapshot: 'busybox' });
  assert.equal(priv.public, false);
});

// reach reports what the sandbox's busybox nc gets from addr:9000 ("hi"
// from the test's namespace, or "" when refused).
async function reach(sb, addr) {
  const r = await sb.process.executeCommand(`nc -w 3 ${addr} 9000 </dev/null`);
  return r.exitCode === 0 ? r.result.trim() : '';
}

test('networkBlockAll and networkAllowList block and allow egress', async () => {
  const [a, b] = process.env.PT_OUTSIDE_ADDRS.split(',');
  const open = await create({ snapshot: 'busybox' });
  assert.equal(await reach(open, a), 'hi', 'the default reaches the outside');
  assert.equal(await reach(open, b), 'hi');

  const blocked = await create({ snapshot: 'busybox', networkBlockAll: true });
  assert.equal(blocked.networkBlockAll, true);
  assert.equal(await reach(blocked, a), '');
  assert.equal(await reach(blocked, b), '');

  const listed = await create({ snapshot: 'busybox', networkAllowList: `${a}/32` });
  assert.equal(listed.networkAllowList, `${a}/32`);
  assert.equal(await reach(listed, a), 'hi');
  assert.equal(await reach(listed, b), '');

  // Changed live on the running sandbox.
  await listed.updateNetworkSettings({ networkAllowList: `${b}/32` });
  assert.equal(listed.networkAllowList, `${b}/32`);
  assert.equal(await reach(listed, a), '');
  assert.equal(await reach(listed, b), 'hi');
  await listed.updateNetworkSettings({ networkBlockAll: true, networkAllowList: '' });
  assert.equal(await reach(listed, b), '');
  await assert.rejects(listed.updateNetworkSettings({ networkAllowList: a }), (e) => e.statusCode === 400, 'a CIDR needs its prefix');
  // A fork keeps the policy: no way out of a blocked network.
  const fork = track(await blocked.fork());
  assert.equal(fork.networkBlockAll, true);
  assert.equal(await reach(fork, a), '');
});

test('image: names a template; user root; other users, images and absent GPUs are refused', async () => {
  const sb = track(await daytona.create({ image: 'busybox', autoStopInterval: 0 }));
  assert.equal(sb.snapshot, 'busybox');
  assert.match(await sh(sb, 'busybox | head -1'), /BusyBox/);
  await assert.rejects(daytona.create({ image: 'ubuntu:24.04' }), DaytonaNotFoundError);
  await assert.rejects(daytona.create({ image: sdk.Image.base('busybox').runCommands('echo hi') }), (e) => e.statusCode === 400 && /not built/.test(e.message));

  const root = await create({ snapshot: 'busybox', user: 'root' });
  assert.equal(root.user, 'root');
  assert.equal(await sh(root, 'id -un'), 'root');
  await assert.rejects(daytona.create({ snapshot: 'busybox', user: 'daytona' }), (e) => e.statusCode === 400 && /root/.test(e.message));
  // GPUs are Platinum's (docs/gpus.md); this host has none to give.
  await assert.rejects(daytona.create({ snapshot: 'busybox', resources: { gpu: 1, gpuType: 'H100' } }),
    (e) => e instanceof DaytonaConflictError && /GPU/.test(e.message));
});

test('list: paging over several pages, filters, sort', async () => {
  const suite = uniq('page');
  const made = [];
  for (const n of ['c', 'a', 'b']) {
    made.push(await create({ snapshot: 'busybox', name: `${suite}-${n}`, labels: { suite } }));
  }
  const ids = [];
  for await (const s of daytona.list({ labels: { suite }, limit: 2 })) ids.push(s.id);
  assert.deepEqual(ids.sort(), made.map((s) => s.id).sort(), 'every page was fetched');
  // The pages themselves: 2, then 1 with no next cursor.
  const q = `labels=${encodeURIComponent(JSON.stringify({ suite }))}&limit=2&sort=name&order=asc`;
  const p1 = await api('GET', `/sandbox?${q}`);
  assert.equal(p1.status, 200);
  assert.deepEqual(p1.body.items.map((s) => s.name), [`${suite}-a`, `${suite}-b`]);
  assert.ok(p1.body.nextCursor);
  const p2 = await api('GET', `/sandbox?${q}&cursor=${p1.body.nextCursor}`);
  assert.deepEqual(p2.body.items.map((s) => s.name), [`${suite}-c`]);
  assert.equal(p2.body.nextCursor, null);
  // Filters the SDK sends apply before paging.
  const named = [];
  for await (const s of daytona.list({ labels: { suite }, name: `${suite}-a`, states: ['started'], snapshots: ['busybox'], maxCpu: 1 })) named.push(s.name);
  assert.deepEqual(named, [`${suite}-a`]);
  await made[0].stop();
  const stopped = [];
  for await (const s of daytona.list({ labels: { suite }, states: ['stopped'] })) stopped.push(s.id);
  assert.deepEqual(stopped, [made[0].id]);
  const none = [];
  for await (const s of daytona.list({ labels: { suite }, minCpu: 3 })) none.push(s.id);
  assert.deepEqual(none, []);
  assert.equal((await api('GET', '/sandbox?minCpu=lots')).status, 400);
});

test('ttl: autoDestroyAt follows ttlMinutes and setTtl', async () => {
  const sb = await create({ snapshot: 'busybox', ttlMinutes: 30 });
  const at = (s) => (s.autoDestroyAt ? new Date(s.autoDestroyAt).getTime() : null);
  let d = at(sb) - Date.now();
  assert.ok(d > 29 * 60e3 && d <= 30 * 60e3, `autoDestroyAt in ${d} ms`);
  await sb.setTtl(120);
  d = at(await daytona.get(sb.id)) - Date.now();
  assert.ok(d > 119 * 60e3 && d <= 120 * 60e3, `after setTtl(120): ${d} ms`);
  await sb.setTtl(0);
  assert.equal(at(await daytona.get(sb.id)), null, 'setTtl(0) removes the cap');
});

test('over the quota: 429 is DaytonaRateLimitError', async () => {
  const limited = new sdk.Daytona({ apiUrl: process.env.DAYTONA_API_URL, apiKey: process.env.PT_LIMITED_KEY });
  const first = track(await limited.create({ snapshot: 'busybox' }));
  assert.equal(first.state, 'started');
  await assert.rejects(limited.create({ snapshot: 'busybox' }), (e) => e instanceof DaytonaRateLimitError && e.statusCode === 429);
  await first.delete();
});
