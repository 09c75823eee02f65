/** The client: `new Platinum({ url, token })`. */
import { type RawBody, type RequestOptions, Transport, openContext, withContext } from "./http.js";
import { ndjson } from "./streams.js";
import { Artifacts } from "./files.js";
import { SandboxesApi } from "./sandboxes.js";
import type {
  BuildLogLine,
  CreateTemplateBody,
  OrgCreated,
  OrgQuota,
  Project,
  QuotaOverrides,
  RegistryCredential,
  Snapshot,
  Template,
  TemplateBuild,
  TemplateUpload,
  TemplateVersion,
} from "./types.js";

/** The SDK's version, sent in the User-Agent so ptd's logs show which client called. */
export const VERSION = "0.1.0";

/** Where a ptd started with its defaults listens. */
export const DEFAULT_URL = "http://127.0.0.1:7070";

export interface PlatinumOptions {
  /** ptd's URL; falls back to PT_API_URL, then http://127.0.0.1:7070. */
  url?: string;
  /** API token; falls back to PT_TOKEN. */
  token?: string;
  /** Retries of a call whose answer says "try again" (429, 502–504, network errors); default 3, 0 disables. */
  maxRetries?: number;
  /** First retry delay (doubles each time, with jitter); default 250 ms. */
  retryBaseMs?: number;
  /** Longest delay between retries when the server sends no Retry-After; default 8 s. */
  retryMaxMs?: number;
  /** How often waits re-read a sandbox after a server-side wait ran out; default 500 ms. */
  pollIntervalMs?: number;
  /** A fetch to send requests with (a proxy-aware one, a test double); default the global fetch. */
  fetch?: typeof fetch;
  /** Replaces the User-Agent header. */
  userAgent?: string;
}

function env(name: string): string | undefined {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  const v = p?.env?.[name];
  return v ? v : undefined;
}

/** Org calls (creating an org and setting its quotas need a platform admin token). */
export class OrgsApi {
  /** @internal */
  constructor(private readonly t: Transport) {}

  /** Creates an organization and returns it with its first API token (shown once). */
  create(input: { name: string }, opts?: RequestOptions): Promise<OrgCreated> {
    return withContext(opts, async (ctx) => (await this.t.json<OrgCreated>({ method: "POST", path: "/v1/orgs", json: input }, ctx)).data);
  }

  /** An org's quota limits, overrides and usage. */
  quotas(orgId: string, opts?: RequestOptions): Promise<OrgQuota> {
    return withContext(opts, async (ctx) => (await this.t.json<OrgQuota>({ method: "GET", path: `/v1/orgs/${encodeURIComponent(orgId)}/quotas` }, ctx)).data);
  }

  /** Replaces an org's quota overrides (null or absent: the server default; 0: no limit). */
  setQuotas(orgId: string, overrides: QuotaOverrides, opts?: RequestOptions): Promise<OrgQuota> {
    return withContext(opts, async (ctx) => (await this.t.json<OrgQuota>({ method: "PUT", path: `/v1/orgs/${encodeURIComponent(orgId)}/quotas`, json: overrides }, ctx)).data);
  }
}

export class ProjectsApi {
  /** @internal */
  constructor(private readonly t: Transport) {}

  create(input: { name: string }, opts?: RequestOptions): Promise<Project> {
    return withContext(opts, async (ctx) => (await this.t.json<Project>({ method: "POST", path: "/v1/projects", json: input }, ctx)).data);
  }

  list(opts?: RequestOptions): Promise<Project[]> {
    return withContext(opts, async (ctx) => (await this.t.json<{ rows?: Project[] }>({ method: "GET", path: "/v1/projects" }, ctx)).data.rows ?? []);
  }
}

export class TemplatesApi {
  /** @internal */
  constructor(private readonly t: Transport) {}

  list(opts?: RequestOptions): Promise<Template[]> {
    return withContext(opts, async (ctx) => (await this.t.json<{ rows?: Template[] }>({ method: "GET", path: "/v1/templates" }, ctx)).data.rows ?? []);
  }

  get(slug: string, opts?: RequestOptions): Promise<Template> {
    return withContext(opts, async (ctx) => (await this.t.json<Template>({ method: "GET", path: `/v1/templates/${encodeURIComponent(slug)}` }, ctx)).data);
  }

  /**
   * Builds a version of the org's own template from `from_image`, an
   * `image_upload_id` or a `dockerfile` (with `context_upload_id`). The
   * build runs in the background: follow it with `logs` or `wait`
   * (docs/templates.md).
   */
  create(input: CreateTemplateBody, opts?: RequestOptions): Promise<TemplateBuild> {
    return withContext(opts, async (ctx) => (await this.t.json<TemplateBuild>({ method: "POST", path: "/v1/templates", json: input }, ctx)).data);
  }

  /** Uploads a Dockerfile build context (a tar) for `create`'s `context_upload_id`. */
  uploadContext(tar: RawBody, opts?: RequestOptions): Promise<TemplateUpload> {
    return this.upload("context", tar, opts);
  }

  /** Uploads an image tarball (`docker save` or OCI layout) for `create`'s `image_upload_id`. */
  uploadImage(tar: RawBody, opts?: RequestOptions): Promise<TemplateUpload> {
    return this.upload("image", tar, opts);
  }

  private upload(purpose: string, tar: RawBody, opts?: RequestOptions): Promise<TemplateUpload> {
    return withContext(opts, async (ctx) =>
      (await this.t.json<TemplateUpload>({ method: "POST", path: "/v1/templates/uploads", query: { purpose }, body: tar, contentType: "application/x-tar" }, ctx)).data);
  }

  /** A build's status (`running`, `ready`, `failed`), its version and, when it failed, where. */
  getBuild(slug: string, buildId: string, opts?: RequestOptions): Promise<TemplateBuild> {
    return withContext(opts, async (ctx) => (await this.t.json<TemplateBuild>({ method: "GET", path: this.buildPath(slug, buildId) }, ctx)).data);
  }

  /**
   * A build's log lines after `since`; with `follow` it yields them as they
   * happen until the build ends (the last line is `done`).
   */
  async *logs(slug: string, buildId: string, o: { since?: number; follow?: boolean } & RequestOptions = {}): AsyncGenerator<BuildLogLine> {
    const ctx = openContext(o);
    try {
      const res = await this.t.send({ method: "GET", path: `${this.buildPath(slug, buildId)}/logs`, query: { since: o.since, follow: o.follow }, accept: "application/x-ndjson" }, ctx);
      if (!res.body) return;
      for await (const line of ndjson(res.body)) yield line as BuildLogLine;
    } finally {
      ctx.dispose();
    }
  }

  /** Follows a build's log (each line to `onLine`) until it ends, and returns the finished build. */
  async wait(slug: string, buildId: string, o: { onLine?: (line: BuildLogLine) => void } & RequestOptions = {}): Promise<TemplateBuild> {
    for await (const line of this.logs(slug, buildId, { ...o, follow: true })) o.onLine?.(line);
    return this.getBuild(slug, buildId, o);
  }

  /** Every version of a template, newest first. */
  versions(slug: string, opts?: RequestOptions): Promise<TemplateVersion[]> {
    return withContext(opts, async (ctx) =>
      (await this.t.json<{ rows?: TemplateVersion[] }>({ method: "GET", path: `/v1/templates/${encodeURIComponent(slug)}/versions` }, ctx)).data.rows ?? []);
  }

  /** Deletes the org's template (every version); returns the deleted version IDs. A version in use is `template_in_use`. */
  delete(slug: string, opts?: RequestOptions): Promise<string[]> {
    return withContext(opts, async (ctx) =>
      (await this.t.json<{ deleted?: string[] }>({ method: "DELETE", path: `/v1/templates/${encodeURIComponent(slug)}` }, ctx)).data.deleted ?? []);
  }

  /** Deletes one version of the org's template. */
  async deleteVersion(slug: string, versionId: string, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: `/v1/templates/${encodeURIComponent(slug)}/versions/${encodeURIComponent(versionId)}` }, ctx));
  }

  /** Stores the org's credentials for a registry host: a username and password, or a token. */
  setRegistryCredential(registry: string, cred: { username: string; password: string } | { token: string }, opts?: RequestOptions): Promise<RegistryCredential> {
    return withContext(opts, async (ctx) =>
      (await this.t.json<RegistryCredential>({ method: "PUT", path: `/v1/registry-credentials/${encodeURIComponent(registry)}`, json: cred }, ctx)).data);
  }

  /** The registries the org stored credentials for (never the secrets). */
  registryCredentials(opts?: RequestOptions): Promise<RegistryCredential[]> {
    return withContext(opts, async (ctx) =>
      (await this.t.json<{ rows?: RegistryCredential[] }>({ method: "GET", path: "/v1/registry-credentials" }, ctx)).data.rows ?? []);
  }

  /** Forgets the org's credentials for a registry. */
  async deleteRegistryCredential(registry: string, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: `/v1/registry-credentials/${encodeURIComponent(registry)}` }, ctx));
  }

  private buildPath(slug: string, buildId: string): string {
    return `/v1/templates/${encodeURIComponent(slug)}/builds/${encodeURIComponent(buildId)}`;
  }
}

export class SnapshotsApi {
  /** @internal */
  constructor(private readonly t: Transport) {}

  get(snapshotId: string, opts?: RequestOptions): Promise<Snapshot> {
    return withContext(opts, async (ctx) => (await this.t.json<Snapshot>({ method: "GET", path: `/v1/snapshots/${encodeURIComponent(snapshotId)}` }, ctx)).data);
  }

  async delete(snapshotId: string, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: `/v1/snapshots/${encodeURIComponent(snapshotId)}` }, ctx));
  }
}

/**
 * A client for one ptd. Its groups of calls: `sandboxes`, `templates`,
 * `snapshots`, `artifacts`, `projects`, `orgs`. Safe to share.
 */
export class Platinum {
  readonly url: string;
  readonly sandboxes: SandboxesApi;
  readonly templates: TemplatesApi;
  readonly snapshots: SnapshotsApi;
  readonly artifacts: Artifacts;
  readonly projects: ProjectsApi;
  readonly orgs: OrgsApi;
  /** @internal */
  readonly t: Transport;
  /** @internal */
  readonly pollIntervalMs: number;

  constructor(opts: PlatinumOptions = {}) {
    const url = (opts.url || env("PT_API_URL") || DEFAULT_URL).replace(/\/+$/, "");
    if (!/^https?:\/\/[^/]/.test(url)) throw new TypeError(`url ${JSON.stringify(url)}: want an http:// or https:// URL such as ${DEFAULT_URL}`);
    const token = opts.token || env("PT_TOKEN");
    if (!token) throw new TypeError("no API token: pass { token } or set PT_TOKEN");
    const f = opts.fetch ?? globalThis.fetch;
    if (!f) throw new TypeError("no global fetch: use Node 18 or newer, or pass { fetch }");
    this.url = url;
    this.t = new Transport({
      baseUrl: url,
      token,
      userAgent: opts.userAgent ?? `platinum-ts/${VERSION}`,
      maxRetries: opts.maxRetries ?? 3,
      retryBaseMs: opts.retryBaseMs ?? 250,
      retryMaxMs: opts.retryMaxMs ?? 8000,
      fetch: f.bind(globalThis),
    });
    this.pollIntervalMs = opts.pollIntervalMs ?? 500;
    this.sandboxes = new SandboxesApi(this);
    this.templates = new TemplatesApi(this.t);
    this.snapshots = new SnapshotsApi(this.t);
    this.artifacts = new Artifacts(this.t);
    this.projects = new ProjectsApi(this.t);
    this.orgs = new OrgsApi(this.t);
  }

  /** Checks that ptd answers GET /healthz (needs no token). */
  async health(opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "GET", path: "/healthz" }, ctx));
  }
}
