// The real e2b SDK (package.json pins it) against a real ptd. Run by
// e2b_test.go's TestSDK with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY
// pointing at the daemon; nothing else is configured.
//
//   node --test sdk.test.mjs
import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import {
  Sandbox,
  CommandExitError,
  FileNotFoundError,
  NotFoundError,
  SandboxNotFoundError,
  SandboxError,
  TimeoutError,
} from 'e2b'

for (const v of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY']) {
  if (!process.env[v]) throw new Error(`${v} must be set (e2b_test.go sets it)`)
}

const tag = randomBytes(4).toString('hex')
const unknownId = 'sbx_01KA0000000000000000000000'

// Polls cond until it is true or the bound runs out (then fails with msg):
// events arrive asynchronously, but a lost one must fail, not hang.
async function eventually(cond, msg, boundMs = 20_000) {
  const end = Date.now() + boundMs
  while (Date.now() < end) {
    if (await cond()) return
    await new Promise((r) => setTimeout(r, 50))
  }
  assert.fail(`${msg} (waited ${boundMs} ms)`)
}

// rawInfo reads GET /sandboxes/:id without the SDK, for Platinum's extra
// fields (restore, ramRestored) the SDK does not map.
async function rawInfo(id) {
  const res = await fetch(`${process.env.E2B_API_URL}/sandboxes/${id}`, {
    headers: { 'X-API-Key': process.env.E2B_API_KEY },
  })
  return res.json()
}

describe('e2b SDK against ptd', () => {
  let sbx // pt-base ('base'): the SDK runs commands with /bin/bash -l -c

  before(async () => {
    sbx = await Sandbox.create('base', {
      timeoutMs: 300_000,
      metadata: { suite: tag, role: 'main' },
      envs: { SBX_LEVEL: 'from-create' },
    })
  })
  after(async () => {
    await sbx?.kill().catch(() => {})
  })

  test('create answers a ready sandbox', async () => {
    assert.match(sbx.sandboxId, /^sbx_/)
    assert.equal(await sbx.isRunning(), true)
    const r = await sbx.commands.run('echo ready')
    assert.equal(r.stdout, 'ready\n')
  })

  test('commands.run: stdout, stderr, exit code', async () => {
    const r = await sbx.commands.run('echo hello; echo oops >&2')
    assert.equal(r.exitCode, 0)
    assert.equal(r.stdout, 'hello\n')
    assert.equal(r.stderr, 'oops\n')
  })

  test('commands.run: non-zero exit throws CommandExitError', async () => {
    await assert.rejects(sbx.commands.run('echo partial; exit 3'), (err) => {
      assert.ok(err instanceof CommandExitError, `got ${err}`)
      assert.equal(err.exitCode, 3)
      assert.equal(err.stdout, 'partial\n')
      return true
    })
  })

  test('commands.run: envs (per call and from create) and cwd', async () => {
    const r = await sbx.commands.run('echo $PER_CALL $SBX_LEVEL; pwd', { envs: { PER_CALL: 'yes' }, cwd: '/tmp' })
    assert.equal(r.stdout, 'yes from-create\n/tmp\n')
  })

  test('commands.run: onStdout / onStderr stream', async () => {
    const out = []
    const err = []
    await sbx.commands.run('for i in 1 2 3; do echo out$i; echo err$i >&2; done', {
      onStdout: (d) => out.push(d),
      onStderr: (d) => err.push(d),
    })
    assert.equal(out.join(''), 'out1\nout2\nout3\n')
    assert.equal(err.join(''), 'err1\nerr2\nerr3\n')
  })

  test('commands: background + wait, list, kill', async () => {
    const h = await sbx.commands.run('sleep 0.3; echo done', { background: true })
    assert.ok(h.pid > 0)
    const r = await h.wait()
    assert.equal(r.stdout, 'done\n')

    const long = await sbx.commands.run('sleep 600', { background: true })
    const procs = await sbx.commands.list()
    assert.ok(procs.some((p) => p.pid === long.pid), `pid ${long.pid} not in ${JSON.stringify(procs)}`)
    assert.equal(await sbx.commands.kill(long.pid), true)
    await assert.rejects(long.wait(), (err) => err instanceof CommandExitError)
    assert.equal(await sbx.commands.kill(999999), false)
  })

  test('files: write, read, list, exists, makeDir, rename, remove', async () => {
    const dir = `/tmp/files-${tag}`
    assert.equal(await sbx.files.makeDir(`${dir}/sub`), true)
    assert.equal(await sbx.files.makeDir(`${dir}/sub`), false)
    const info = await sbx.files.write(`${dir}/a.txt`, 'hello file')
    assert.equal(info.path, `${dir}/a.txt`)
    assert.equal(await sbx.files.read(`${dir}/a.txt`), 'hello file')
    const bytes = await sbx.files.read(`${dir}/a.txt`, { format: 'bytes' })
    assert.equal(Buffer.from(bytes).toString(), 'hello file')
    await sbx.files.write([
      { path: `${dir}/m1.txt`, data: 'one' },
      { path: `${dir}/m2.txt`, data: 'two' },
    ])
    const names = (await sbx.files.list(dir)).map((e) => `${e.name}:${e.type}`).sort()
    assert.deepEqual(names, ['a.txt:file', 'm1.txt:file', 'm2.txt:file', 'sub:dir'])
    assert.equal(await sbx.files.exists(`${dir}/a.txt`), true)
    assert.equal(await sbx.files.exists(`${dir}/nope`), false)
    await sbx.files.rename(`${dir}/a.txt`, `${dir}/b.txt`)
    assert.equal(await sbx.files.read(`${dir}/b.txt`), 'hello file')
    await sbx.files.remove(`${dir}/b.txt`)
    assert.equal(await sbx.files.exists(`${dir}/b.txt`), false)
    await assert.rejects(sbx.files.read(`${dir}/b.txt`), (err) => err instanceof FileNotFoundError || err instanceof NotFoundError)
    // A command sees what files wrote, and the other way round.
    await sbx.commands.run(`echo from-shell > ${dir}/sub/s.txt`)
    assert.equal(await sbx.files.read(`${dir}/sub/s.txt`), 'from-shell\n')
  })

  test('files.watchDir reports changes', async () => {
    const dir = `/tmp/watch-${tag}`
    await sbx.files.makeDir(dir)
    const events = []
    const handle = await sbx.files.watchDir(dir, (e) => events.push(e))
    try {
      await sbx.files.write(`${dir}/new.txt`, 'x')
      await eventually(() => events.some((e) => e.name === 'new.txt'), `no watch event for new.txt: ${JSON.stringify(events)}`)
      assert.ok(events.some((e) => e.name === 'new.txt' && (e.type === 'create' || e.type === 'write')), JSON.stringify(events))
    } finally {
      await handle.stop()
    }
  })

  test('pty: create, sendInput, output, kill', async () => {
    let out = ''
    const dec = new TextDecoder()
    const term = await sbx.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) } })
    try {
      await sbx.pty.sendInput(term.pid, new TextEncoder().encode('echo pty-$((40+2))\n'))
      await eventually(() => out.includes('pty-42'), `pty output: ${JSON.stringify(out)}`)
      await sbx.pty.resize(term.pid, { cols: 100, rows: 30 })
    } finally {
      assert.equal(await sbx.pty.kill(term.pid), true)
    }
  })

  test('setTimeout and getInfo', async () => {
    await sbx.setTimeout(600_000)
    const info = await sbx.getInfo()
    assert.equal(info.sandboxId, sbx.sandboxId)
    assert.equal(info.templateId, 'pt-base')
    assert.equal(info.state, 'running')
    assert.deepEqual(info.metadata, { suite: tag, role: 'main' })
    const left = info.endAt.getTime() - Date.now()
    assert.ok(left > 500_000 && left <= 600_000, `endAt ${info.endAt.toISOString()} is ${left} ms away, want about 600 s`)
    assert.ok(info.startedAt.getTime() <= Date.now())
    assert.ok(info.cpuCount >= 1 && info.memoryMB >= 128)
  })

  test('getMetrics', async () => {
    const m = await sbx.getMetrics()
    assert.equal(m.length, 1)
    assert.ok(m[0].memTotal > 0 && m[0].timestamp instanceof Date)
  })

  test('Sandbox.list with a metadata filter', async () => {
    const other = await Sandbox.create('busybox', { metadata: { suite: tag, role: 'other' } })
    try {
      const page = await Sandbox.list({ query: { metadata: { suite: tag, role: 'main' } } }).nextItems()
      assert.deepEqual(page.map((s) => s.sandboxId), [sbx.sandboxId])
      assert.equal(page[0].state, 'running')
      const both = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
      assert.deepEqual(both.map((s) => s.sandboxId).sort(), [sbx.sandboxId, other.sandboxId].sort())
      const paused = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()
      assert.deepEqual(paused, [])
      // Pages of one, following X-Next-Token.
      const p = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 1 })
      const seen = []
      while (p.hasNext) seen.push(...(await p.nextItems()).map((s) => s.sandboxId))
      assert.deepEqual(seen.sort(), [sbx.sandboxId, other.sandboxId].sort())
    } finally {
      await other.kill()
    }
  })

  test('pause → connect keeps files (and processes when memory is restored)', async (t) => {
    const s = await Sandbox.create('base', { metadata: { suite: tag, role: 'pause' } })
    try {
      await s.files.write('/root/keep.txt', 'survives pause')
      const bg = await s.commands.run('sleep 900', { background: true })
      assert.equal(await s.pause(), true)
      assert.equal(await s.pause(), false) // already paused (409)
      assert.equal((await s.getInfo()).state, 'paused')
      assert.equal(await s.isRunning(), false)
      // envd of a paused sandbox answers as a dead one does behind E2B
      // (502; Connect code unavailable), which the SDK reports as not
      // running.
      await assert.rejects(s.commands.run('true'), (err) => err instanceof SandboxNotFoundError)
      await assert.rejects(s.files.read('/root/keep.txt'), (err) => err instanceof TimeoutError)

      const again = await Sandbox.connect(s.sandboxId)
      assert.equal(await again.files.read('/root/keep.txt'), 'survives pause')
      const raw = await rawInfo(s.sandboxId)
      assert.ok(['memory', 'disk_only'].includes(raw.restore), `restore ${raw.restore}`)
      t.diagnostic(`resume restored: ${raw.restore} (ramRestored ${raw.ramRestored})`)
      if (raw.restore === 'memory') {
        assert.equal(raw.ramRestored, true)
        const procs = await again.commands.list()
        assert.ok(procs.some((p) => p.pid === bg.pid), `process ${bg.pid} lost although memory was restored: ${JSON.stringify(procs)}`)
      } else {
        t.diagnostic('memory was not restored: process survival not asserted')
      }
      const r = await again.commands.run('echo alive')
      assert.equal(r.stdout, 'alive\n')
      // Connecting to a running sandbox is a no-op that answers 200.
      const same = await Sandbox.connect(s.sandboxId)
      assert.equal(same.sandboxId, s.sandboxId)
    } finally {
      await s.kill().catch(() => {})
    }
  })

  test('createSnapshot → create from it (by ID and name), listSnapshots, fork, deleteSnapshot', async () => {
    const s = await Sandbox.create('base', { metadata: { suite: tag, role: 'snap' } })
    const made = []
    try {
      await s.files.write('/root/snap.txt', 'in snapshot')
      const name = `snap-${tag}`
      const snap = await s.createSnapshot({ name })
      assert.match(snap.snapshotId, /^snap_/)
      assert.deepEqual(snap.names, [name])
      assert.equal(await s.isRunning(), true) // the source keeps running
      await s.files.write('/root/snap.txt', 'after snapshot')

      const listed = []
      const pages = Sandbox.listSnapshots({ sandboxId: s.sandboxId, limit: 1 })
      while (pages.hasNext) listed.push(...(await pages.nextItems()))
      assert.ok(listed.some((x) => x.snapshotId === snap.snapshotId), JSON.stringify(listed))

      for (const ref of [snap.snapshotId, name]) {
        const clone = await Sandbox.create(ref)
        made.push(clone)
        assert.notEqual(clone.sandboxId, s.sandboxId)
        assert.equal(await clone.files.read('/root/snap.txt'), 'in snapshot')
      }

      const forks = await s.fork({ count: 2 })
      assert.equal(forks.length, 2)
      const srcHost = (await s.commands.run('cat /etc/hostname')).stdout.trim()
      const hosts = new Set([srcHost])
      for (const f of forks) {
        assert.ok(f instanceof Sandbox, `fork failed: ${f}`)
        made.push(f)
        assert.equal(await f.files.read('/root/snap.txt'), 'after snapshot')
        hosts.add((await f.commands.run('cat /etc/hostname')).stdout.trim())
      }
      assert.equal(hosts.size, 3, `forks need their own hostnames: ${[...hosts]}`)

      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
      assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
      await assert.rejects(Sandbox.create(snap.snapshotId), (err) => err instanceof SandboxError)
    } finally {
      for (const m of made) await m.kill().catch(() => {})
      await s.kill().catch(() => {})
    }
  })

  test('updateNetwork replaces the egress policy of a running sandbox', async () => {
    await Sandbox.updateNetwork(sbx.sandboxId, { denyOut: ['10.0.0.0/8'] })
    const res = await fetch(`${process.env.E2B_API_URL}/v1/sandboxes/${sbx.sandboxId}`, {
      headers: { Authorization: `Bearer ${process.env.E2B_API_KEY}` },
    })
    const rec = await res.json()
    assert.deepEqual(rec.network?.deny_out, ['10.0.0.0/8'], JSON.stringify(rec.network))
    await Sandbox.updateNetwork(sbx.sandboxId, {})
    await assert.rejects(Sandbox.updateNetwork(unknownId, {}), (err) => err instanceof SandboxNotFoundError)
  })

  // A bomb far past the sandbox's memory (one 4 GiB string in 512 MB)
  // fails the command at once and the sandbox answers again. This
  // harness's sandboxes are runc, where the kernel kills the bomb inside;
  // tests/e2e's TestIsolationMemoryBombFarPastItsSize covers both classes.
  test('commands.run of a memory bomb fails at once, and the sandbox answers again', async () => {
    const s = await Sandbox.create('base', { timeoutMs: 120_000 })
    try {
      assert.equal((await s.commands.run('echo up')).stdout, 'up\n')
      const t0 = Date.now()
      await assert.rejects(s.commands.run(`perl -e '$x = "a" x (4 << 30)'`, { timeoutMs: 120_000 }))
      const took = Date.now() - t0
      assert.ok(took < 20_000, `the bomb's command failed only after ${took} ms`)
      let out
      await eventually(async () => {
        out = await s.commands.run('echo back').then((r) => r.stdout, () => undefined)
        return out === 'back\n'
      }, `the sandbox did not answer again (last: ${out})`)
    } finally {
      await s.kill().catch(() => {})
    }
  })

  test('kill, then the sandbox is gone', async () => {
    const s = await Sandbox.create('busybox')
    assert.equal(await s.kill(), true)
    assert.equal(await Sandbox.kill(s.sandboxId), false)
    await assert.rejects(Sandbox.getInfo(s.sandboxId), (err) => err instanceof SandboxNotFoundError)
  })

  test('errors: unknown sandbox, unknown template', async () => {
    await assert.rejects(Sandbox.connect(unknownId), (err) => err instanceof SandboxNotFoundError)
    await assert.rejects(Sandbox.getInfo(unknownId), (err) => err instanceof SandboxNotFoundError)
    await assert.rejects(Sandbox.setTimeout(unknownId, 10_000), (err) => err instanceof SandboxNotFoundError)
    await assert.rejects(Sandbox.create('no-such-template'), (err) => {
      assert.ok(err instanceof SandboxError, `got ${err?.constructor?.name}: ${err}`)
      assert.match(err.message, /template 'no-such-template' not found/)
      return true
    })
  })
})
