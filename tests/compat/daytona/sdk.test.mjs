// The real Daytona SDK (lib.mjs: @daytonaio/sdk or @daytona/sdk) against a
// real ptd (see daytona_test.go), told only DAYTONA_API_URL and
// DAYTONA_API_KEY: the main lifecycle, process, file and git cases.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { sdk, pkgName, sdkVersion, daytona, create, track, sleep, sh, deadline, uniq } from './lib.mjs';

const {
  DaytonaNotFoundError,
  DaytonaConflictError,
  DaytonaFileNotFoundError,
  DaytonaProcessExecutionTimeoutError,
} = sdk;

test(`the SDK under test is ${pkgName} ${sdkVersion}`, () => {
  assert.equal(sdkVersion, { '@daytonaio/sdk': '0.218.0', '@daytona/sdk': '0.216.0' }[pkgName]);
});

// twoCPUs is what nproc shows for cpu: 2 (this host may have fewer).
const twoCPUs = String(Math.min(2, availableParallelism()));

// memTotalMB is the guest's MemTotal.
async function memTotalMB(sb) {
  return Math.round(Number((await sh(sb, "awk '/^MemTotal/ {print $2}' /proc/meminfo"))) / 1024);
}

test('create answers started with labels, env and resources', async () => {
  const sb = await create({ labels: { team: 'sdk' }, envVars: { GREETING: 'hi' }, resources: { cpu: 2, memory: 1, disk: 3 } });
  assert.equal(sb.state, 'started');
  assert.equal(sb.labels.team, 'sdk');
  assert.equal(sb.labels['code-toolbox-language'], 'python');
  assert.equal(sb.env.GREETING, 'hi');
  assert.equal(sb.cpu, 2);
  assert.equal(sb.memory, 1);
  assert.equal(sb.disk, 3);
  const got = await daytona.get(sb.id);
  assert.equal(got.id, sb.id);
  assert.equal(got.state, 'started');
  const r = await sb.process.executeCommand('echo $GREETING; nproc');
  assert.deepEqual(r.result.trim().split('\n'), ['hi', twoCPUs], 'the guest has the 2 vCPUs the DTO claims');
  const mem = await memTotalMB(sb);
  assert.ok(mem > 900 && mem <= 1024, `the guest has the 1 GiB the DTO claims (MemTotal ${mem} MB)`);
});

test('executeCommand: exit code, stdout, cwd, env, timeout', async () => {
  const sb = await create();
  let r = await sb.process.executeCommand('echo out; echo err >&2; exit 3');
  assert.equal(r.exitCode, 3);
  assert.match(r.result, /out/);
  assert.match(r.result, /err/); // merged, as Daytona does
  r = await sb.process.executeCommand('pwd', '/tmp');
  assert.equal(r.result.trim(), '/tmp');
  r = await sb.process.executeCommand('echo $A-$B', undefined, { A: '1', B: 'two' });
  assert.equal(r.result.trim(), '1-two');
  const t0 = Date.now();
  await assert.rejects(sb.process.executeCommand('sleep 30', undefined, undefined, 1), DaytonaProcessExecutionTimeoutError);
  assert.ok(Date.now() - t0 < 20000, 'the timeout ended the command');
  // The killed command is gone.
  r = await sb.process.executeCommand('ps -eo args | grep -c "^sleep 30" || true');
  assert.equal(r.result.trim(), '0');
});

test('sessions: state carries over, async command, log follow', async () => {
  const sb = await create();
  await sb.process.createSession('s1');
  let r = await sb.process.executeSessionCommand('s1', { command: 'cd /tmp && export X=kept' });
  assert.equal(r.exitCode, 0);
  r = await sb.process.executeSessionCommand('s1', { command: 'pwd; echo $X; echo oops >&2' });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, '/tmp\nkept\n');
  assert.equal(r.stderr, 'oops\n');
  const a = await sb.process.executeSessionCommand('s1', {
    command: 'for i in 1 2 3; do echo tick$i; echo warn$i >&2; sleep 0.3; done; (exit 7)',
    runAsync: true,
  });
  assert.ok(a.cmdId);
  let cmd = await sb.process.getSessionCommand('s1', a.cmdId);
  assert.equal(cmd.exitCode, undefined, 'still running');
  const out = [];
  const err = [];
  await sb.process.getSessionCommandLogs('s1', a.cmdId, (s) => out.push(s), (s) => err.push(s));
  assert.equal(out.join(''), 'tick1\ntick2\ntick3\n');
  assert.equal(err.join(''), 'warn1\nwarn2\nwarn3\n');
  cmd = await sb.process.getSessionCommand('s1', a.cmdId);
  assert.equal(cmd.exitCode, 7);
  const logs = await sb.process.getSessionCommandLogs('s1', a.cmdId);
  assert.equal(logs.stdout, 'tick1\ntick2\ntick3\n');
  const s = await sb.process.getSession('s1');
  assert.equal(s.commands.length, 3);
  assert.ok((await sb.process.listSessions()).some((x) => x.sessionId === 's1'));
  await sb.process.deleteSession('s1');
  await assert.rejects(sb.process.getSession('s1'), DaytonaNotFoundError);
});

test('PTY: input, output, resize, exit', async () => {
  const sb = await create();
  let buf = '';
  const pty = await sb.process.createPty({ id: 'p1', cols: 80, rows: 24, envs: { PTYVAR: 'set' }, onData: (d) => { buf += new TextDecoder().decode(d); } });
  await pty.sendInput('echo "v=$PTYVAR"; stty size\n');
  for (const end = deadline(); Date.now() < end && !/24 80/.test(buf);) await sleep(50);
  assert.match(buf, /v=set/);
  assert.match(buf, /24 80/);
  await pty.resize(120, 40);
  await pty.sendInput('stty size\n');
  for (const end = deadline(); Date.now() < end && !/40 120/.test(buf);) await sleep(50);
  assert.match(buf, /40 120/);
  const info = await sb.process.getPtySessionInfo('p1');
  assert.equal(info.cols, 120);
  assert.equal(info.active, true);
  assert.ok((await sb.process.listPtySessions()).some((p) => p.id === 'p1'));
  // A second terminal, killed from the API.
  const other = await sb.process.createPty({ id: 'p2', onData: () => {} });
  await sb.process.killPtySession('p2');
  const killed = await other.wait();
  assert.notEqual(killed.exitCode, 0);
  await other.disconnect();
  await pty.sendInput('exit 5\n');
  const res = await pty.wait();
  assert.equal(res.exitCode, 5);
  await pty.disconnect();
});

test('files: upload, download, list, folders, move, delete, find, replace, search, permissions', async () => {
  const sb = await create();
  await sb.fs.createFolder('/tmp/work', '755');
  await sb.fs.uploadFile(Buffer.from('hello world\nsecond line\n'), '/tmp/work/a.txt');
  await sb.fs.uploadFiles([
    { source: Buffer.from('alpha\n'), destination: '/tmp/work/sub/b.txt' },
    { source: Buffer.from('beta hello\n'), destination: '/tmp/work/c.md' },
  ]);
  assert.equal((await sb.fs.downloadFile('/tmp/work/a.txt')).toString(), 'hello world\nsecond line\n');
  const many = await sb.fs.downloadFiles([{ source: '/tmp/work/sub/b.txt' }, { source: '/tmp/work/missing.txt' }]);
  assert.equal(many[0].result.toString(), 'alpha\n');
  assert.ok(many[1].error, 'a missing file is an error entry');
  await assert.rejects(sb.fs.downloadFile('/tmp/work/missing.txt'), DaytonaNotFoundError);
  const names = (await sb.fs.listFiles('/tmp/work')).map((f) => f.name).sort();
  assert.deepEqual(names, ['a.txt', 'c.md', 'sub']);
  const info = await sb.fs.getFileDetails('/tmp/work/a.txt');
  assert.equal(info.size, 24);
  assert.equal(info.isDir, false);
  const found = await sb.fs.findFiles('/tmp/work', 'hello');
  assert.deepEqual(found.map((m) => [m.file, m.line]).sort(), [['/tmp/work/a.txt', 1], ['/tmp/work/c.md', 1]]);
  const search = await sb.fs.searchFiles('/tmp/work', '*.txt');
  assert.deepEqual(search.files.sort(), ['/tmp/work/a.txt', '/tmp/work/sub/b.txt']);
  const rep = await sb.fs.replaceInFiles(['/tmp/work/a.txt', '/tmp/work/nope.txt'], 'hello', 'bye');
  assert.equal(rep[0].success, true);
  assert.equal(rep[1].success, false);
  assert.equal((await sb.fs.downloadFile('/tmp/work/a.txt')).toString(), 'bye world\nsecond line\n');
  await sb.fs.moveFiles('/tmp/work/c.md', '/tmp/work/sub/c.md');
  await sb.fs.setFilePermissions('/tmp/work/sub/c.md', { mode: '600' });
  const r = await sb.process.executeCommand('stat -c %a /tmp/work/sub/c.md; ls /tmp/work');
  assert.deepEqual(r.result.trim().split('\n'), ['600', 'a.txt', 'sub']);
  await sb.fs.deleteFile('/tmp/work/a.txt');
  await sb.fs.deleteFile('/tmp/work/sub', true);
  assert.deepEqual(await sb.fs.listFiles('/tmp/work'), []);
});

test('git: clone, status, add, commit, branches, checkout, push, pull', async () => {
  const sb = await create();
  // seed runs the steps in the sandbox, each after the one before
  // succeeded, and wants them all to succeed.
  const seed = async (...steps) => {
    const r = await sb.process.executeCommand(steps.join(' && '));
    assert.equal(r.exitCode, 0, r.result);
  };
  // The "remote" is a bare repository inside the sandbox: tests use no network.
  await seed(
    'git init -q --bare -b main /srv/origin.git',
    'git init -q -b main /tmp/seed && cd /tmp/seed',
    'echo hello > README.md && git add README.md',
    'git -c user.name=Seed -c user.email=seed@example.com commit -qm init',
    'git push -q /srv/origin.git main',
  );
  await sb.git.clone('file:///srv/origin.git', '/root/work');
  assert.equal(new TextDecoder().decode(await sb.fs.downloadFile('/root/work/README.md')), 'hello\n');
  await sb.fs.uploadFile(Buffer.from('new\n'), '/root/work/new.txt');
  let st = await sb.git.status('/root/work');
  assert.equal(st.currentBranch, 'main');
  assert.ok(st.fileStatus.some((f) => f.name === 'new.txt'), JSON.stringify(st.fileStatus));
  await sb.git.add('/root/work', ['new.txt']);
  const c = await sb.git.commit('/root/work', 'add new', 'Tester', 'tester@example.com');
  assert.match(c.sha, /^[0-9a-f]{40}$/);
  st = await sb.git.status('/root/work');
  assert.deepEqual(st.fileStatus, []);
  await sb.git.createBranch('/root/work', 'feature');
  assert.ok((await sb.git.branches('/root/work')).branches.includes('feature'));
  await sb.git.checkoutBranch('/root/work', 'feature');
  assert.equal((await sb.git.status('/root/work')).currentBranch, 'feature');
  await sb.git.checkoutBranch('/root/work', 'main');
  await sb.git.push('/root/work');
  const r = await sb.process.executeCommand('git --git-dir=/srv/origin.git log --format=%s main');
  assert.deepEqual(r.result.trim().split('\n'), ['add new', 'init']);
  // A commit that reaches the remote from elsewhere comes back with pull.
  await seed(
    'cd /tmp/seed && git pull -q /srv/origin.git main',
    'echo more >> README.md',
    'git -c user.name=Seed -c user.email=seed@example.com commit -qam more',
    'git push -q /srv/origin.git main',
  );
  await sb.git.pull('/root/work');
  assert.equal(new TextDecoder().decode(await sb.fs.downloadFile('/root/work/README.md')), 'hello\nmore\n');
});

test('labels update and list by label', async () => {
  const tag = uniq('l');
  const a = await create({ labels: { suite: tag, role: 'a' } });
  await create({ labels: { suite: tag, role: 'b' } });
  const got = await a.setLabels({ suite: tag, role: 'changed' });
  assert.equal(got.role, 'changed');
  assert.equal((await daytona.get(a.id)).labels.role, 'changed');
  const ids = [];
  for await (const s of daytona.list({ labels: { suite: tag } })) ids.push(s.id);
  assert.equal(ids.length, 2);
  const changed = [];
  for await (const s of daytona.list({ labels: { suite: tag, role: 'changed' } })) changed.push(s.id);
  assert.deepEqual(changed, [a.id]);
});

test('timers: autostop, autoarchive, autodelete', async () => {
  const sb = await create();
  await sb.setAutostopInterval(30);
  await sb.setAutoArchiveInterval(0); // the maximum
  await sb.setAutoDeleteInterval(2 * 24 * 60);
  const got = await daytona.get(sb.id);
  assert.equal(got.autoStopInterval, 30);
  assert.equal(got.autoArchiveInterval, 30 * 24 * 60);
  assert.equal(got.autoDeleteInterval, 2 * 24 * 60);
  await sb.setAutoDeleteInterval(-1);
  assert.equal((await daytona.get(sb.id)).autoDeleteInterval, -1);
});

test('ephemeral: deleted at stop', async () => {
  const sb = track(await daytona.create({ snapshot: 'busybox', ephemeral: true }));
  assert.equal(sb.autoDeleteInterval, 0);
  await sb.stop();
  assert.equal(sb.state, 'destroyed', 'never shown stopped');
  await assert.rejects(daytona.get(sb.id), DaytonaNotFoundError);
});

test('stop/start keeps a file and a running process (gVisor), start while stopping conflicts', async () => {
  const sb = await create({ snapshot: 'pt-base', labels: { 'platinum.runtime': 'gvisor' } });
  const dto = await (await fetch(`${process.env.DAYTONA_API_URL}/sandbox/${sb.id}`, { headers: { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` } })).json();
  assert.equal(dto.runtime, 'gvisor');
  await sb.fs.uploadFile(Buffer.from('kept'), '/root/keep.txt');
  await sb.process.createSession('bg');
  await sb.process.executeSessionCommand('bg', { command: 'n=0; while true; do n=$((n+1)); echo $n > /tmp/counter.new; mv /tmp/counter.new /tmp/counter; sleep 0.1; done', runAsync: true });
  await sleep(500);
  const stopping = sb.stop();
  let seen = false;
  for (let i = 0; i < 200 && !seen; i++) {
    const s = await daytona.get(sb.id);
    if (s.state === 'stopping') seen = true;
    else if (s.state === 'stopped') break;
    else await sleep(10);
  }
  if (seen) {
    // Both refused while the stop is in flight, as Daytona refuses them.
    await assert.rejects(sb.start(), DaytonaConflictError);
    await assert.rejects(sb.delete(), DaytonaConflictError);
  }
  await stopping;
  assert.equal(sb.state, 'stopped');
  await sb.start();
  assert.equal(sb.state, 'started');
  assert.equal((await sb.fs.downloadFile('/root/keep.txt')).toString(), 'kept');
  const c1 = Number((await sb.process.executeCommand('cat /tmp/counter')).result.trim());
  await sleep(400);
  const c2 = Number((await sb.process.executeCommand('cat /tmp/counter')).result.trim());
  assert.ok(c2 > c1, `the loop keeps counting after the start (${c1} → ${c2})`);
  const s = await sb.process.getSession('bg');
  assert.equal(s.commands.length, 1, 'the session survived in the agent\'s memory');
  assert.ok(seen, 'the stop was observed in state stopping (so start-while-stopping was tested)');
});

test('start answer carries restore and ram_restored', async () => {
  const sb = await create({ snapshot: 'busybox' });
  await sb.stop();
  const r = await fetch(`${process.env.DAYTONA_API_URL}/sandbox/${sb.id}/start`, { method: 'POST', headers: { Authorization: `Bearer ${process.env.DAYTONA_API_KEY}` } });
  const body = await r.json();
  assert.equal(r.status, 200);
  assert.equal(body.state, 'started');
  assert.ok(['memory', 'disk_only'].includes(body.restore), body.restore);
  assert.equal(typeof body.ram_restored, 'boolean');
});

test('archive then start', async () => {
  const sb = await create({ snapshot: 'busybox' });
  await sb.fs.uploadFile(Buffer.from('through the archive'), '/root/a.txt');
  await sb.stop();
  await sb.archive();
  assert.equal(sb.state, 'archived');
  await sb.start();
  assert.equal(sb.state, 'started');
  assert.equal((await sb.fs.downloadFile('/root/a.txt')).toString(), 'through the archive');
});

test('resize: the guest sees the new cpu, memory and disk', async () => {
  const sb = await create({ snapshot: 'busybox', resources: { cpu: 1, memory: 1, disk: 3 } });
  assert.equal(await sh(sb, 'nproc'), '1');
  const mem0 = await memTotalMB(sb);
  assert.ok(mem0 > 900 && mem0 <= 1024, `MemTotal at boot ${mem0} MB`);
  const disk = async () => Number(await sh(sb, "df -k / | tail -1 | awk '{print $2}'"));
  const disk0 = await disk();
  await sb.resize({ cpu: 2, memory: 2 });
  assert.equal(sb.cpu, 2);
  assert.equal(sb.memory, 2);
  assert.equal(await sh(sb, 'nproc'), twoCPUs, 'live: two vCPUs online');
  assert.equal(await memTotalMB(sb), 2048, 'live: MemTotal 2 GiB');
  await sb.stop();
  await sb.resize({ disk: 4 });
  assert.equal(sb.disk, 4);
  await sb.start();
  const disk1 = await disk();
  assert.ok(disk1 - disk0 > 900 * 1024, `the filesystem grew by about 1 GiB (${disk0} → ${disk1} KB)`);
  assert.equal(await sh(sb, 'nproc'), twoCPUs, 'the cold boot kept the new size');
  await assert.rejects(sb.resize({ disk: 3 }), (e) => e.statusCode === 400 && /shrink/.test(e.message));
});

test('preview URL reaches a server in the sandbox', async () => {
  const sb = await create();
  await sb.fs.uploadFile(Buffer.from('preview ok'), '/tmp/www/index.html');
  await sb.process.createSession('web');
  await sb.process.executeSessionCommand('web', { command: 'cd /tmp/www && python3 -m http.server 8080', runAsync: true });
  const link = await sb.getPreviewLink(8080);
  assert.equal(new URL(link.url).port, new URL(process.env.PT_PREVIEW_URL).port, link.url);
  let text = '';
  for (const end = deadline(); Date.now() < end;) {
    const r = await fetch(link.url, { headers: { 'x-daytona-preview-token': link.token } });
    if (r.status === 200) { text = await r.text(); break; }
    await sleep(100);
  }
  assert.equal(text, 'preview ok');
  const denied = await fetch(link.url);
  assert.equal(denied.status, 401);
  const signed = await sb.getSignedPreviewUrl(8080, 120);
  const first = await fetch(signed.url, { redirect: 'manual' });
  assert.equal(first.status, 307);
  const cookie = first.headers.get('set-cookie').split(';')[0];
  const page = await fetch(new URL(first.headers.get('location'), signed.url), { headers: { cookie } });
  assert.equal(await page.text(), 'preview ok');
});

test('errors: unknown id, delete', async () => {
  await assert.rejects(daytona.get('sbx_00000000000000000000000000'), DaytonaNotFoundError);
  await assert.rejects(daytona.get('no-such-sandbox'), DaytonaNotFoundError);
  const sb = await create({ snapshot: 'busybox' });
  await assert.rejects(sb.fs.downloadFile('/nope/x'), DaytonaFileNotFoundError);
  await sb.delete();
  await assert.rejects(daytona.get(sb.id), DaytonaNotFoundError);
});
