// The official MCP TypeScript SDK's client against a real ptd's /mcp
// (Streamable HTTP). mcp_test.go starts ptd and runs this with node --test;
// it sets PT_API_URL (ptd) and PT_TOKEN (an admin token).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const API = process.env.PT_API_URL;
const TOKEN = process.env.PT_TOKEN;
assert.ok(API && TOKEN, 'PT_API_URL and PT_TOKEN must be set');

const clients = [];
const cleanup = [];
after(async () => {
  for (const id of cleanup) await v1('DELETE', `/v1/sandboxes/${id}`).catch(() => {});
  for (const c of clients) await c.close().catch(() => {});
});

// v1 calls the REST API directly, for set-up and checks outside MCP.
async function v1(method, path, body, token = TOKEN) {
  const r = await fetch(API + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function connect(token = TOKEN) {
  const transport = new StreamableHTTPClientTransport(new URL(API + '/mcp'), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: 'platinum-mcp-node-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return client;
}

function text(res) {
  return res.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
}

async function ok(client, name, args, opts) {
  const res = await client.callTool({ name, arguments: args }, undefined, opts);
  assert.ok(!res.isError, `${name}: ${text(res)}`);
  return res;
}

async function fails(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  assert.equal(res.isError, true, `${name} succeeded: ${JSON.stringify(res)}`);
  return text(res);
}

async function create(client, args = {}) {
  const res = await ok(client, 'create_sandbox', { template: 'busybox', ...args });
  cleanup.push(res.structuredContent.id);
  return res.structuredContent;
}

test('tools, schemas and a sandbox session', async () => {
  const client = await connect();
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  assert.deepEqual(names, ['create_sandbox', 'delete_sandbox', 'exec', 'fork_sandbox', 'get_sandbox', 'list_files',
    'list_sandboxes', 'preview_url', 'read_file', 'run_code', 'snapshot_sandbox', 'start_sandbox', 'stop_sandbox', 'write_file']);
  const exec = tools.find((t) => t.name === 'exec');
  assert.equal(exec.inputSchema.type, 'object');
  assert.deepEqual([...exec.inputSchema.required].sort(), ['command', 'sandbox_id']);
  assert.match(exec.inputSchema.properties.command.description, /sh -c/);
  assert.ok(exec.outputSchema.properties.truncated, 'exec has an output schema with truncated');

  const progress = [];
  const created = await ok(client, 'create_sandbox', { template: 'busybox', ttl_seconds: 600 }, {
    onprogress: (p) => progress.push(p.message),
  });
  const sb = created.structuredContent;
  cleanup.push(sb.id);
  assert.equal(sb.state, 'running');
  assert.equal(sb.created_by_mcp, true);
  assert.equal(sb.created_by_you, true);
  assert.ok(progress.some((m) => /running/.test(m)), `progress: ${progress}`);

  const ex = await ok(client, 'exec', { sandbox_id: sb.id, command: 'echo hi' });
  assert.equal(ex.structuredContent.exit_code, 0);
  assert.equal(ex.structuredContent.stdout, 'hi\n');

  await ok(client, 'write_file', { sandbox_id: sb.id, path: '/root/node.txt', content: 'written by node\n' });
  const rd = await ok(client, 'read_file', { sandbox_id: sb.id, path: '/root/node.txt' });
  assert.equal(text(rd), 'written by node\n');

  const { resourceTemplates } = await client.listResourceTemplates();
  assert.equal(resourceTemplates[0].uriTemplate, 'platinum://sandboxes/{id}/files/{+path}');
  const rr = await client.readResource({ uri: `platinum://sandboxes/${sb.id}/files/root/node.txt` });
  assert.equal(rr.contents[0].text, 'written by node\n');
  const tpls = await client.readResource({ uri: 'platinum://templates' });
  assert.ok(JSON.parse(tpls.contents[0].text).some((t) => t.slug === 'busybox'));

  await ok(client, 'exec', { sandbox_id: sb.id, command: 'mkdir -p /w && echo from-node > /w/index.html && (busybox httpd -p 8081 -h /w &)' });
  const pv = (await ok(client, 'preview_url', { sandbox_id: sb.id, port: 8081 })).structuredContent;
  let body = '';
  for (let i = 0; i < 100 && body !== 'from-node\n'; i++) {
    const r = await fetch(pv.path_url, { headers: { [pv.token_header]: pv.token } }).catch(() => null);
    body = r && r.ok ? await r.text() : '';
    if (body !== 'from-node\n') await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(body, 'from-node\n');

  assert.match(await fails(client, 'exec', { sandbox_id: sb.id }), /command/);
  assert.match(await fails(client, 'preview_url', { sandbox_id: sb.id, port: 0 }), /port/);
  assert.match(await fails(client, 'get_sandbox', { sandbox_id: 'sbx_01JZZZZZZZZZZZZZZZZZZZZZZZ' }), /^\[not_found\]/);

  const del = await ok(client, 'delete_sandbox', { sandbox_id: sb.id });
  assert.match(del.structuredContent.state, /^delet/);
});

test('run_code keeps state and returns a plot as image content', async () => {
  const client = await connect();
  const sb = await create(client, { template: 'code-interpreter' });
  await ok(client, 'run_code', { sandbox_id: sb.id, code: 'x = 41' });
  const next = await ok(client, 'run_code', { sandbox_id: sb.id, code: 'x + 1' });
  assert.equal(next.structuredContent.results[0].text, '42');
  const plot = await ok(client, 'run_code', { sandbox_id: sb.id, code: 'import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()' });
  const img = plot.content.find((c) => c.type === 'image' && c.mimeType === 'image/png');
  assert.ok(img, `no PNG image content in ${plot.content.map((c) => c.type)}`);
  assert.deepEqual([...Buffer.from(img.data, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
  const err = await ok(client, 'run_code', { sandbox_id: sb.id, code: '1/0' });
  assert.equal(err.structuredContent.error.name, 'ZeroDivisionError');
});

test('delete of a sandbox this token did not make through MCP is refused', async () => {
  const client = await connect();
  const r = await v1('POST', '/v1/sandboxes?wait_for_state=running', { template: 'busybox' });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  cleanup.push(r.body.id);
  assert.match(await fails(client, 'delete_sandbox', { sandbox_id: r.body.id }), /^\[forbidden\].*not created through MCP.*--allow-delete-any/);
  assert.equal((await v1('GET', `/v1/sandboxes/${r.body.id}`)).body.state, 'running');

  // Another token of the same organization: its MCP sandbox is its own.
  const tok = await v1('POST', '/v1/tokens', {});
  assert.equal(tok.status, 201, JSON.stringify(tok.body));
  const other = await connect(tok.body.token);
  const theirs = await create(other);
  assert.equal(theirs.created_by_you, true);
  const seen = (await ok(client, 'get_sandbox', { sandbox_id: theirs.id })).structuredContent;
  assert.equal(seen.created_by_mcp, true);
  assert.equal(seen.created_by_you, false);
  assert.match(await fails(client, 'delete_sandbox', { sandbox_id: theirs.id }), /^\[forbidden\].*another token/);
  assert.equal((await v1('GET', `/v1/sandboxes/${theirs.id}`)).body.state, 'running');
  assert.match((await ok(other, 'delete_sandbox', { sandbox_id: theirs.id })).structuredContent.state, /^delet/);
});

test("another org's token sees none of the sandboxes", async () => {
  const mine = await create(await connect());
  const org = await v1('POST', '/v1/orgs', { name: `mcp-node-${Date.now()}` });
  assert.equal(org.status, 201, JSON.stringify(org.body));
  const other = await connect(org.body.token);
  const l = await ok(other, 'list_sandboxes', {});
  assert.equal(l.structuredContent.total, 0);
  assert.deepEqual(l.structuredContent.sandboxes, []);
  assert.match(await fails(other, 'get_sandbox', { sandbox_id: mine.id }), /^\[not_found\]/);
  assert.match(await fails(other, 'exec', { sandbox_id: mine.id, command: 'true' }), /^\[not_found\]/);
});

test('cancelling a call cancels its request', async () => {
  const client = await connect();
  const sb = await create(client);
  const ac = new AbortController();
  const call = client.callTool({ name: 'exec', arguments: { sandbox_id: sb.id, command: 'echo $$ > /tmp/node.pid; exec sleep 300', timeout_seconds: 600 } },
    undefined, { signal: ac.signal, timeout: 600000 });
  call.catch(() => {});
  let pid = '';
  for (let i = 0; i < 150 && !pid; i++) {
    const r = await v1('POST', `/v1/sandboxes/${sb.id}/exec`, { cmd: 'cat /tmp/node.pid 2>/dev/null' });
    pid = r.body.stdout.trim();
    if (!pid) await new Promise((res) => setTimeout(res, 200));
  }
  assert.ok(pid, 'the command never started');
  const alive = async () => (await v1('POST', `/v1/sandboxes/${sb.id}/exec`, { cmd: `kill -0 ${pid}` })).body.exit_code === 0;
  assert.equal(await alive(), true);
  ac.abort();
  await assert.rejects(call);
  let still = true;
  for (let i = 0; i < 150 && still; i++) {
    still = await alive();
    if (still) await new Promise((res) => setTimeout(res, 200));
  }
  assert.equal(still, false, `sleep ${pid} still runs after the cancel`);
});
