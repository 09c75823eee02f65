// What every *.test.mjs here shares: the SDK package under test (the
// legacy @daytonaio/sdk or the new @daytona/sdk, both pinned in
// package-lock.json; DAYTONA_SDK_PACKAGE picks one), a client told only
// the API URL and key, and sandbox cleanup. daytona_test.go runs every
// file once per package against a real ptd.
import { after } from 'node:test';
import { readFileSync } from 'node:fs';

export const pkgName = process.env.DAYTONA_SDK_PACKAGE || '@daytonaio/sdk';
export const sdk = await import(pkgName);
export const sdkVersion = JSON.parse(readFileSync(new URL(`./node_modules/${pkgName}/package.json`, import.meta.url))).version;

export const apiUrl = process.env.DAYTONA_API_URL;
export const apiKey = process.env.DAYTONA_API_KEY;
export const daytona = new sdk.Daytona({ apiUrl, apiKey });

const made = [];
after(async () => {
  for (const sb of made) {
    try { await sb.delete(); } catch { /* already gone */ }
  }
});

// track deletes sb when the file's tests end.
export function track(sb) {
  made.push(sb);
  return sb;
}

// create makes a python-node sandbox (python3, node, git) that never
// auto-stops, with params on top.
export async function create(params = {}) {
  return track(await daytona.create({ snapshot: 'python-node', autoStopInterval: 0, ...params }));
}

// uniq names what a test makes, unique across runs that share one ptd
// (daytona_test.go runs both packages at once).
export const uniq = (prefix) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// deadline is when a wait started now gives up: generous, since a loaded
// machine can take many seconds to start a server in a sandbox, and a
// wait ends as soon as its condition holds.
export const deadline = (ms = 60000) => Date.now() + ms;

// api calls the Daytona API without the SDK (for what it does not expose
// or drops from answers); it returns {status, body}.
export async function api(method, path, body, key = apiKey) {
  const r = await fetch(`${apiUrl}${path}`, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await r.text();
  let json;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: r.status, body: json };
}

// toolbox calls a sandbox's toolbox route without the SDK.
export async function toolbox(sb, method, route, body) {
  const r = await fetch(`${sb.toolboxProxyUrl}/${sb.id}${route}`, {
    method,
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: r.status, body: await r.json() };
}

// sh runs a command and returns its trimmed output, failing on a non-zero
// exit.
export async function sh(sb, cmd) {
  const r = await sb.process.executeCommand(cmd);
  if (r.exitCode !== 0) throw new Error(`${cmd}: exit ${r.exitCode}: ${r.result}`);
  return r.result.trim();
}
