/**
 * @platinum-dev/sdk — the TypeScript SDK for Platinum sandboxes.
 *
 * ```ts
 * import { Platinum } from "@platinum-dev/sdk";
 * const client = new Platinum({ url: process.env.PT_API_URL!, token: process.env.PT_TOKEN! });
 * const sbx = await client.sandboxes.create({ template: "pt-base" }, { waitForRunning: true });
 * console.log((await sbx.exec(["echo", "hi"])).stdout);
 * ```
 */
export { Platinum, DEFAULT_URL, VERSION, OrgsApi, ProjectsApi, SnapshotsApi, TemplatesApi } from "./client.js";
export type { PlatinumOptions } from "./client.js";
export { SandboxesApi, SandboxHandle, normalizeCreate } from "./sandboxes.js";
export type {
  Commands,
  CreateOptions,
  CreateSandboxInput,
  ForkResult,
  ListSandboxesInput,
  ListSandboxHandlesResponse,
  SandboxFields,
  WaitOptions,
} from "./sandboxes.js";
export { EventStream } from "./exec.js";
export type { Command, ExecEvent, ExecOptions, ExecResult, ExitInfo, OutputCallbacks } from "./exec.js";
export { Processes, ProcessHandle } from "./processes.js";
export type { ProcessInfo, ProcessInput, ProcessStartOptions, Signal } from "./processes.js";
export { CodeContexts, Result } from "./code.js";
export type { Execution, ExecutionError, RunCodeOptions } from "./code.js";
export { Artifacts, Files, Preview } from "./files.js";
export type { ReadFormat } from "./files.js";
export type { WriteData } from "./streams.js";
export { IDEMPOTENCY_KEY_HEADER, REPLAYED_HEADER, backoffMs, newIdempotencyKey, retryAfterMs } from "./http.js";
export type { RequestOptions } from "./http.js";
export * from "./errors.js";
export type * from "./types.js";
