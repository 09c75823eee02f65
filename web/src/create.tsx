// The create form (/new): every field of POST /v1/sandboxes a person sets
// by hand — template and version, size, runtime, type and timers, TTL,
// environment, metadata, network policy, SSH keys, project and parent.
import type { TargetedEvent } from "preact";
import { useState } from "preact/hooks";
import { call, type Host, type Project, type Sandbox, type Template, type TemplateVersion } from "./api";
import { lines, optNumber, parsePairs } from "./format";
import { navigate } from "./router";
import { put } from "./store";
import { ErrorBox, Field, LinesField, useLoad } from "./ui";

// The SandboxType table of api/openapi.yaml: each type's timers.
const typeDefaults: Record<string, { stop: string; archive: string; del: string }> = {
  persistent: { stop: "60", archive: "7", del: "never" },
  ephemeral: { stop: "15", archive: "none", del: "when it stops" },
  dev: { stop: "120", archive: "30", del: "never" },
};

export function CreatePage({ query }: { query: URLSearchParams }) {
  const templates = useLoad(() => call<{ rows: Template[] }>("GET", "/v1/templates"), []);
  const projects = useLoad(() => call<{ rows: Project[] }>("GET", "/v1/projects"), []);
  const hosts = useLoad(() => call<{ rows: Host[] }>("GET", "/v1/hosts"), []);
  const [template, setTemplate] = useState(query.get("template") ?? "busybox");
  const versions = useLoad(() => template
    ? call<{ rows: TemplateVersion[] }>("GET", `/v1/templates/${encodeURIComponent(template)}/versions`)
    : Promise.resolve({ rows: [] }), [template]);
  const [type, setType] = useState("persistent");
  const [egress, setEgress] = useState("allow");
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const runtimes = [...new Set((hosts.data?.rows ?? []).flatMap((h) => (h.runtime_classes ?? []).map((r) => r.name)))];
  const d = typeDefaults[type];

  const submit = async (e: TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    const el = e.currentTarget.elements;
    const v = (n: string) => (el.namedItem(n) as HTMLInputElement).value;
    setError(null);
    setBusy(true);
    try {
      const body: Record<string, unknown> = {
        template: v("template").trim(),
        cpu: Number(v("cpu")),
        ram_mb: Number(v("ram_mb")),
        disk_gb: Number(v("disk_gb")),
        type: v("type"),
        auto_resume: (el.namedItem("auto_resume") as HTMLInputElement).checked,
      };
      const opt = (k: string, val: unknown) => {
        if (val !== undefined && val !== "" && !(Array.isArray(val) && !val.length) &&
          !(typeof val === "object" && val && !Array.isArray(val) && !Object.keys(val).length)) body[k] = val;
      };
      opt("name", v("name").trim());
      opt("template_version_id", v("template_version_id"));
      opt("runtime", v("runtime"));
      opt("project_id", v("project_id"));
      opt("parent_id", v("parent_id").trim());
      opt("auto_stop_minutes", optNumber(v("auto_stop_minutes")));
      opt("auto_archive_days", optNumber(v("auto_archive_days")));
      opt("auto_delete_days", optNumber(v("auto_delete_days")));
      const ttl = optNumber(v("ttl_minutes"));
      opt("ttl_ms", ttl === undefined ? undefined : Math.round(ttl * 60_000));
      opt("env", parsePairs(v("env"), "Environment"));
      opt("metadata", parsePairs(v("metadata"), "Metadata"));
      const allow = lines(v("allow_out"), true), deny = lines(v("deny_out"), true);
      if (egress !== "allow" || allow.length || deny.length) body.network = { egress, allow_out: allow, deny_out: deny };
      opt("ssh_keys", lines(v("ssh_keys")));
      const s = put(await call<Sandbox>("POST", "/v1/sandboxes", body), 0);
      navigate(`/sandbox/${encodeURIComponent(s.id)}`);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <main id="main">
      <h1 tabIndex={-1}>New sandbox</h1>
      <form class="create" aria-label="Create a sandbox" onSubmit={submit}>
        <fieldset>
          <legend>Template</legend>
          <div class="grid">
            <Field id="c-template" label="Template">
              <select id="c-template" name="template" value={template} onChange={(e) => setTemplate(e.currentTarget.value)}>
                {!templates.data && <option value={template}>{template}</option>}
                {templates.data?.rows.map((t) => (
                  <option key={t.slug} value={t.slug}>{t.slug}{t.default ? " (default)" : ""}{t.status !== "ready" ? ` — ${t.status}` : ""}</option>
                ))}
              </select>
            </Field>
            <Field id="c-version" label="Version" hint="the newest ready one unless pinned">
              <select id="c-version" name="template_version_id">
                <option value="">Newest ready</option>
                {versions.data?.rows.filter((x) => x.status === "ready").map((x) => (
                  <option key={x.id} value={x.id}>v{x.version} · {x.id}</option>
                ))}
              </select>
            </Field>
            <Field id="c-name" label="Name" hint="optional, unique among live sandboxes">
              <input id="c-name" name="name" autoComplete="off" pattern="[a-zA-Z0-9][a-zA-Z0-9._\-]*" maxLength={63} />
            </Field>
            <Field id="c-runtime" label="Runtime">
              <select id="c-runtime" name="runtime">
                <option value="">Server default</option>
                {runtimes.map((r) => <option key={r} value={r}>{r}</option>)}
              </select>
            </Field>
          </div>
        </fieldset>
        <fieldset>
          <legend>Size</legend>
          <div class="grid">
            <Field id="c-cpu" label="vCPUs"><input id="c-cpu" name="cpu" type="number" min="0.1" max="64" step="0.1" defaultValue="1" required /></Field>
            <Field id="c-ram" label="RAM (MB)"><input id="c-ram" name="ram_mb" type="number" min="128" step="64" defaultValue="512" required /></Field>
            <Field id="c-disk" label="Disk (GB)"><input id="c-disk" name="disk_gb" type="number" min="1" defaultValue="2" required /></Field>
          </div>
        </fieldset>
        <fieldset>
          <legend>Type and timers</legend>
          <div class="grid">
            <Field id="c-type" label="Type">
              <select id="c-type" name="type" value={type} onChange={(e) => setType(e.currentTarget.value)}>
                <option value="persistent">persistent</option>
                <option value="ephemeral">ephemeral</option>
                <option value="dev">dev</option>
              </select>
            </Field>
            <Field id="c-stop" label="Auto-stop (idle minutes)" hint={`blank: the type's (${d.stop}); 0: never`}>
              <input id="c-stop" name="auto_stop_minutes" type="number" min="0" max="100000" placeholder={d.stop} />
            </Field>
            <Field id="c-archive" label="Auto-archive (days stopped)" hint={`blank: the type's (${d.archive}); 0: never`}>
              <input id="c-archive" name="auto_archive_days" type="number" min="0" max="100000" placeholder={d.archive} />
            </Field>
            <Field id="c-delete" label="Auto-delete (days stopped)" hint={`blank: the type's (${d.del}); 0: never`}>
              <input id="c-delete" name="auto_delete_days" type="number" min="0" max="100000" placeholder={d.del} />
            </Field>
            <Field id="c-ttl" label="TTL (minutes)" hint="destroyed when it runs out; at most 60">
              <input id="c-ttl" name="ttl_minutes" type="number" min="0.1" max="60" step="0.1" />
            </Field>
            <div class="field check">
              <input id="c-resume" name="auto_resume" type="checkbox" defaultChecked />
              <label for="c-resume">Auto-resume on a preview request</label>
            </div>
          </div>
        </fieldset>
        <fieldset>
          <legend>Environment and metadata</legend>
          <div class="grid two">
            <LinesField id="c-env" name="env" label="Environment" hint="KEY=value, one a line; values are never shown again" rows={3} />
            <LinesField id="c-meta" name="metadata" label="Metadata" hint="key=value, one a line" rows={3} />
          </div>
        </fieldset>
        <fieldset>
          <legend>Network</legend>
          <div class="grid">
            <Field id="c-egress" label="Outbound traffic no rule matches">
              <select id="c-egress" name="egress" value={egress} onChange={(e) => setEgress(e.currentTarget.value)}>
                <option value="allow">allowed</option>
                <option value="deny">denied</option>
              </select>
            </Field>
            <LinesField id="c-allow" name="allow_out" label="Allow out" hint="CIDRs, addresses, domains or *.suffix; one a line" rows={2} />
            <LinesField id="c-deny" name="deny_out" label="Deny out" hint="CIDRs or addresses; one a line" rows={2} />
          </div>
        </fieldset>
        <fieldset>
          <legend>Access and placement</legend>
          <div class="grid two">
            <LinesField id="c-ssh" name="ssh_keys" label="SSH public keys" hint="one a line (ssh-ed25519 AAAA… comment); shown later as fingerprints" rows={3} wide />
            <div class="grid">
              <Field id="c-project" label="Project">
                <select id="c-project" name="project_id">
                  <option value="">Default (or the parent's)</option>
                  {projects.data?.rows.map((p) => <option key={p.id} value={p.id}>{p.name}{p.default ? " (default)" : ""}</option>)}
                </select>
              </Field>
              <Field id="c-parent" label="Parent" hint="optional: a running sandbox's ID">
                <input id="c-parent" name="parent_id" autoComplete="off" placeholder="sbx_…" defaultValue={query.get("parent") ?? ""} />
              </Field>
            </div>
          </div>
        </fieldset>
        <ErrorBox error={error ?? templates.error} />
        <div class="row">
          <button type="submit" disabled={busy} aria-busy={busy}>{busy ? "Creating…" : "Create sandbox"}</button>
          <a href="/" data-nav>Cancel</a>
        </div>
      </form>
    </main>
  );
}
