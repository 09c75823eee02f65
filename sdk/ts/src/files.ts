/**
 * Files in a sandbox, artifacts exported from it, and its preview URLs.
 * File contents stream both ways: a write sends its body as it is read
 * (strings and bytes as they are; streams and async iterables, Node's
 * fs.createReadStream included, chunk by chunk), and `read(path, { format:
 * "stream" })` hands back the response body as it arrives.
 */
import { PlatinumError } from "./errors.js";
import { type RequestOptions, type Transport, openContext, withContext } from "./http.js";
import { type WriteData, onFinish, toBody } from "./streams.js";
import type { Artifact, FileEntry, MkdirResult, PreviewURL, UploadResult } from "./types.js";

export type ReadFormat = "text" | "bytes" | "stream";

/** The workspace filesystem of one sandbox. Get it from `sandbox.files`. */
export class Files {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly id: string,
  ) {}

  private get path() {
    return `/v1/sandboxes/${encodeURIComponent(this.id)}/files`;
  }

  /** Reads a file as UTF-8 text (the default), bytes, or a stream of its bytes. A directory throws code `is_directory`. */
  read(path: string, opts?: RequestOptions & { format?: "text" }): Promise<string>;
  read(path: string, opts: RequestOptions & { format: "bytes" }): Promise<Uint8Array>;
  read(path: string, opts: RequestOptions & { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts?: RequestOptions & { format?: ReadFormat }): Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    const ctx = openContext(opts);
    let handedOff = false;
    try {
      const res = await this.t.send({ method: "GET", path: this.path, query: { path }, accept: "application/octet-stream" }, ctx);
      if ((res.headers.get("content-type") ?? "").startsWith("application/json")) {
        await res.body?.cancel();
        throw new PlatinumError({ code: "is_directory", status: res.status, message: `${path} is a directory: list it with files.list` });
      }
      const format = opts?.format ?? "text";
      if (format === "text") return await res.text();
      if (format === "bytes") return new Uint8Array(await res.arrayBuffer());
      const body = res.body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
      handedOff = true;
      return onFinish(body, () => ctx.dispose());
    } finally {
      if (!handedOff) ctx.dispose();
    }
  }

  /** Reads a file as text. */
  readText(path: string, opts?: RequestOptions): Promise<string> {
    return this.read(path, { ...opts, format: "text" });
  }

  /** Reads a file as bytes. */
  readBytes(path: string, opts?: RequestOptions): Promise<Uint8Array> {
    return this.read(path, { ...opts, format: "bytes" });
  }

  /** Opens a file as a stream of its bytes, read as it arrives. */
  readStream(path: string, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
    return this.read(path, { ...opts, format: "stream" });
  }

  /**
   * Creates or replaces a file with data: text, bytes, a Blob, a
   * ReadableStream or any (async) iterable of chunks, streamed as it is read.
   * A full disk throws NoSpaceError. A streamed body is sent once: it is not
   * retried.
   */
  async write(path: string, data: WriteData, opts?: RequestOptions): Promise<UploadResult> {
    return withContext(opts, async (ctx) => {
      const { data: out } = await this.t.json<UploadResult>({ method: "PUT", path: this.path, query: { path }, body: toBody(data) }, ctx);
      return out;
    });
  }

  /** Lists a directory. A file throws code `not_a_directory`. */
  async list(path: string, opts?: RequestOptions): Promise<FileEntry[]> {
    return withContext(opts, async (ctx) => {
      const res = await this.t.send({ method: "GET", path: this.path, query: { path } }, ctx);
      if (!(res.headers.get("content-type") ?? "").startsWith("application/json")) {
        await res.body?.cancel();
        throw new PlatinumError({ code: "not_a_directory", status: res.status, message: `${path} is a file: read it with files.read` });
      }
      const out = (await res.json()) as { entries?: FileEntry[] };
      return out.entries ?? [];
    });
  }

  /** Creates a directory with any missing parents; `created` is false when it existed. */
  async mkdir(path: string, opts?: RequestOptions): Promise<MkdirResult> {
    return withContext(opts, async (ctx) => (await this.t.json<MkdirResult>({ method: "POST", path: this.path + "/mkdir", json: { path } }, ctx)).data);
  }

  /** Removes a file, or a directory with everything in it. A missing path throws NotFoundError. */
  async remove(path: string, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: this.path, query: { path } }, ctx));
  }

  /** Whether path exists (file or directory). */
  async exists(path: string, opts?: RequestOptions): Promise<boolean> {
    const dir = path.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";
    const name = path.replace(/\/+$/, "").split("/").pop();
    try {
      return (await this.list(dir, opts)).some((e) => e.name === name);
    } catch (e) {
      if (e instanceof PlatinumError && e.code === "not_found") return false;
      throw e;
    }
  }
}

/** Artifacts: files and directories exported out of sandboxes into the object store. */
export class Artifacts {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly sandboxId?: string,
  ) {}

  /** Exports path of the sandbox as an artifact (a directory becomes a tar). */
  async create(input: { path: string; name?: string; sandboxId?: string }, opts?: RequestOptions): Promise<Artifact> {
    const id = input.sandboxId ?? this.sandboxId;
    if (!id) throw new TypeError("artifacts.create: which sandbox? pass sandboxId");
    const json: Record<string, string> = { path: input.path };
    if (input.name) json["name"] = input.name;
    return withContext(opts, async (ctx) => (await this.t.json<Artifact>({ method: "POST", path: `/v1/sandboxes/${encodeURIComponent(id)}/artifacts`, json }, ctx)).data);
  }

  /** Lists artifacts (this sandbox's, on a handle). */
  async list(opts?: RequestOptions & { sandboxId?: string }): Promise<Artifact[]> {
    const sid = opts?.sandboxId ?? this.sandboxId;
    return withContext(opts, async (ctx) => {
      const { data } = await this.t.json<{ rows?: Artifact[] }>({ method: "GET", path: "/v1/artifacts", query: { sandbox_id: sid } }, ctx);
      return data.rows ?? [];
    });
  }

  async get(id: string, opts?: RequestOptions): Promise<Artifact> {
    return withContext(opts, async (ctx) => (await this.t.json<Artifact>({ method: "GET", path: `/v1/artifacts/${encodeURIComponent(id)}` }, ctx)).data);
  }

  /** Streams an artifact's content. */
  async download(id: string, opts?: RequestOptions): Promise<ReadableStream<Uint8Array>> {
    const ctx = openContext(opts);
    try {
      const res = await this.t.send({ method: "GET", path: `/v1/artifacts/${encodeURIComponent(id)}/content`, accept: "*/*" }, ctx);
      return onFinish(res.body ?? new ReadableStream({ start: (c) => c.close() }), () => ctx.dispose());
    } catch (e) {
      ctx.dispose();
      throw e;
    }
  }

  async delete(id: string, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: `/v1/artifacts/${encodeURIComponent(id)}` }, ctx));
  }
}

/** Preview URLs of one sandbox's ports. Get it from `sandbox.preview`. */
export class Preview {
  /** @internal */
  constructor(
    private readonly t: Transport,
    private readonly id: string,
  ) {}

  private path(port: number) {
    return `/v1/sandboxes/${encodeURIComponent(this.id)}/preview-urls/${port}`;
  }

  /** The URL (and token) that reaches port; `expiresInSeconds` issues a token that expires. */
  async url(port: number, opts?: RequestOptions & { expiresInSeconds?: number }): Promise<PreviewURL> {
    return withContext(opts, async (ctx) => {
      const query = { expires_in_seconds: opts?.expiresInSeconds };
      return (await this.t.json<PreviewURL>({ method: "GET", path: this.path(port), query }, ctx)).data;
    });
  }

  /** Makes port reachable without a token (true) or requires one again (false). */
  async setPublic(port: number, isPublic: boolean, opts?: RequestOptions): Promise<PreviewURL> {
    return withContext(opts, async (ctx) => (await this.t.json<PreviewURL>({ method: "POST", path: this.path(port), json: { public: isPublic } }, ctx)).data);
  }

  /** Revokes port's tokens: URLs handed out so far stop working. */
  async revoke(port: number, opts?: RequestOptions): Promise<void> {
    await withContext(opts, (ctx) => this.t.json({ method: "DELETE", path: this.path(port) }, ctx));
  }
}
