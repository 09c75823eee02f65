/**
 * Wire types, named. They are generated from the API reference
 * (api/openapi.yaml → src/generated/openapi.ts, `npm run gen`), so the SDK
 * cannot drift from the spec: `npm test` regenerates and fails on a diff.
 */
import type { components, operations } from "./generated/openapi.js";

type S = components["schemas"];

/** A sandbox record as the API returns it (snake_case, the REST names). */
export type Sandbox = S["Sandbox"];
export type SandboxState = S["SandboxState"];
export type SandboxStatus = S["SandboxStatus"];
export type SandboxType = S["SandboxType"];
/** The body of POST /v1/sandboxes. */
export type CreateSandboxBody = S["CreateSandbox"];
export type SandboxList = S["SandboxList"];
export type UpdateSandboxBody = S["UpdateSandbox"];
export type EnvResult = S["EnvResult"];
export type NetworkPolicy = S["NetworkPolicy"];
export type NetworkResult = S["NetworkResult"];
export type ResizeRequest = S["ResizeRequest"];
export type ResizeResult = S["ResizeResult"];
export type SandboxMetrics = S["SandboxMetrics"];
export type SandboxUsage = S["SandboxUsage"];
export type ExecRequestBody = S["ExecRequest"];
export type ExecResultBody = S["ExecResult"];
export type ExecEventBody = S["ExecEvent"];
export type FileEntry = S["FileEntry"];
export type UploadResult = S["UploadResult"];
export type MkdirResult = S["MkdirResult"];
export type Snapshot = S["Snapshot"];
export type ForkResultBody = S["ForkResult"];
export type PreviewURL = S["PreviewURL"];
export type Artifact = S["Artifact"];
export type Org = S["Org"];
export type OrgCreated = S["OrgCreated"];
export type OrgQuota = S["OrgQuota"];
export type QuotaOverrides = S["QuotaOverrides"];
export type Project = S["Project"];
export type Template = S["Template"];
export type TemplateVersion = S["TemplateVersion"];
/** The body of POST /v1/templates: a build of the org's own template. */
export type CreateTemplateBody = S["CreateTemplate"];
export type TemplateBuild = S["TemplateBuild"];
/** One line of a template build's log. */
export type BuildLogLine = S["BuildLogLine"];
export type TemplateUpload = S["TemplateUpload"];
export type RegistryCredential = S["RegistryCredential"];
export type ErrorBody = S["Error"];
/** The query of GET /v1/sandboxes. */
export type ListSandboxesQuery = NonNullable<operations["listSandboxes"]["parameters"]["query"]>;
export type ProcessStartBody = S["ProcessStartRequest"];
/** A running process as the API lists it. */
export type ProcessInfo = S["Process"];
export type ProcessInputBody = S["ProcessInput"];
export type ProcessSignalName = S["ProcessSignal"]["signal"];
export type PtySize = S["PtySize"];
export type RunCodeBody = S["RunCodeRequest"];
export type CodeEventBody = S["CodeEvent"];
/** A code context: one kernel whose state persists across cells. */
export type CodeContext = S["CodeContext"];
export type CodeLanguage = NonNullable<S["RunCodeRequest"]["language"]>;
