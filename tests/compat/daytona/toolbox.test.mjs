// The toolbox routes the 0.218 SDK calls that Daytona's open-source
// daemon (v0.190) never had, through the real SDK (lib.mjs): git init,
// remotes, reset, restore, config and credentials; updateEnv; signed
// upload and download URLs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sdk, daytona, create, sh } from './lib.mjs';

test('git: init, remotes, config, user, reset, restore, credentials', async () => {
  const sb = await create();
  await sb.git.init('/root/repo', false, 'trunk');
  assert.equal((await sb.git.status('/root/repo')).currentBranch, 'trunk');
  await sb.git.init('/srv/origin.git', true);
  assert.equal(await sh(sb, 'git -C /srv/origin.git rev-parse --is-bare-repository'), 'true');

  await sb.git.configureUser('Global User', 'global@example.com');
  assert.equal(await sb.git.getConfig('user.name'), 'Global User');
  await sb.git.configureUser('Local User', 'local@example.com', 'local', '/root/repo');
  assert.equal(await sb.git.getConfig('user.email', 'local', '/root/repo'), 'local@example.com');
  await sb.git.setConfig('core.autocrlf', 'input', 'local', '/root/repo');
  assert.equal(await sb.git.getConfig('core.autocrlf', 'local', '/root/repo'), 'input');
  assert.equal(await sb.git.getConfig('no.such'), null, 'an unset key is null');
  assert.equal(await sh(sb, 'git config --global user.email'), 'global@example.com', 'the sandbox user\'s ~/.gitconfig');

  await sb.git.remoteAdd('/root/repo', 'origin', 'file:///srv/origin.git');
  await sb.git.remoteAdd('/root/repo', 'mirror', 'https://bot:hunter2@git.example.com/m.git');
  await assert.rejects(sb.git.remoteAdd('/root/repo', 'origin', 'file:///elsewhere'), sdk.DaytonaConflictError);
  const remotes = (await sb.git.remotes('/root/repo')).remotes;
  assert.deepEqual(remotes.map((r) => [r.name, r.url]).sort(), [
    ['mirror', 'https://bot@git.example.com/m.git'], // the password is left out
    ['origin', 'file:///srv/origin.git'],
  ]);
  assert.equal(await sb.git.remoteGet('/root/repo', 'origin'), 'file:///srv/origin.git');

  // Two commits, a soft reset to the first, unstage, discard.
  await sb.fs.uploadFile(Buffer.from('one\n'), '/root/repo/a.txt');
  await sb.git.add('/root/repo', ['a.txt']);
  const first = await sb.git.commit('/root/repo', 'one', 'Tester', 't@example.com');
  await sb.fs.uploadFile(Buffer.from('two\n'), '/root/repo/a.txt');
  await sb.git.add('/root/repo', ['a.txt']);
  await sb.git.commit('/root/repo', 'two', 'Tester', 't@example.com');
  await sb.git.reset('/root/repo', 'soft', first.sha);
  assert.equal(await sh(sb, 'git -C /root/repo log --format=%s'), 'one');
  let st = await sb.git.status('/root/repo');
  assert.deepEqual(st.fileStatus.map((f) => [f.name, f.staging]), [['a.txt', 'Modified']]);
  await sb.git.restore('/root/repo', ['a.txt'], true);
  st = await sb.git.status('/root/repo');
  assert.deepEqual(st.fileStatus.map((f) => [f.name, f.staging, f.worktree]), [['a.txt', 'Unmodified', 'Modified']]);
  await sb.git.restore('/root/repo', ['a.txt']);
  assert.equal((await sb.fs.downloadFile('/root/repo/a.txt')).toString(), 'one\n');
  await sb.fs.uploadFile(Buffer.from('dirty\n'), '/root/repo/a.txt');
  await sb.git.reset('/root/repo', 'hard');
  assert.equal((await sb.fs.downloadFile('/root/repo/a.txt')).toString(), 'one\n');
  await sb.git.push('/root/repo', undefined, undefined); // to origin, the bare repo inside the sandbox
  assert.equal(await sh(sb, 'git --git-dir=/srv/origin.git log --format=%s trunk'), 'one');

  await sb.git.dangerouslyAuthenticate('bot', 's3cr3t', 'git.example.com');
  assert.equal((await sb.fs.downloadFile('/root/.git-credentials')).toString().trim(), 'https://bot:s3cr3t@git.example.com');
  assert.equal(await sb.git.getConfig('credential.helper'), 'store');
});

test('updateEnv: later commands see it, the DTO shows it, a restart keeps it', async () => {
  const sb = await create({ snapshot: 'busybox', envVars: { KEEP: 'k', DROP: 'd' } });
  await sb.updateEnv({ ADDED: 'new value' }, { unset: ['DROP'] });
  assert.equal(await sh(sb, 'echo "$KEEP|$DROP|$ADDED"'), 'k||new value');
  await sb.process.createSession('s');
  const r = await sb.process.executeSessionCommand('s', { command: 'echo "$ADDED"' });
  assert.equal(r.stdout, 'new value\n', 'a session started afterwards inherits it');
  assert.deepEqual((await daytona.get(sb.id)).env, { KEEP: 'k', ADDED: 'new value' });
  await assert.rejects(sb.updateEnv({ 'BAD NAME': 'x' }), (e) => e.statusCode === 400);
  await sb.stop();
  await sb.start();
  assert.equal(await sh(sb, 'echo "$ADDED"'), 'new value');
});

test('signed URLs: upload and download without the API key, until rotated', async () => {
  const sb = await create({ snapshot: 'busybox' });
  const up = await sb.uploadUrl('/root/signed/in.txt', 120);
  assert.ok(!up.includes(process.env.DAYTONA_API_KEY), 'the URL carries no API key');
  const form = new FormData();
  form.append('file', new Blob(['uploaded with a signed URL']), 'in.txt');
  let r = await fetch(up, { method: 'POST', body: form });
  assert.equal(r.status, 200, await r.clone().text());
  assert.equal(await sh(sb, 'cat /root/signed/in.txt'), 'uploaded with a signed URL');

  const down = await sb.downloadUrl('/root/signed/in.txt');
  r = await fetch(down);
  assert.equal(r.status, 200);
  assert.equal(await r.text(), 'uploaded with a signed URL');
  // The signature covers the path and the operation.
  const other = new URL(down);
  other.searchParams.set('path', '/etc/hostname');
  assert.equal((await fetch(other)).status, 403);
  assert.equal((await fetch(up.replace('/files/upload-v2', '/files/download'))).status, 403);
  assert.equal((await fetch(down, { method: 'POST', body: 'x' })).status, 401, 'no signed route is POST /files/download');
  // Rotating the key voids the URLs signed before; new ones work.
  await sb.rotateSigningKey();
  assert.equal((await fetch(down)).status, 403);
  r = await fetch(await sb.downloadUrl('/root/signed/in.txt'));
  assert.equal(r.status, 200);
  await r.arrayBuffer();
});
