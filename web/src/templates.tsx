// Templates (/template) and one template's builds (/template/{slug}): each
// build is an immutable version; a new build runs in the background and
// reports a progress line, and a failed one its error. A version an org's
// own build made (an image or a Dockerfile, docs/templates.md) also has
// that build's full log, read as it streams.
import { useEffect, useState } from "preact/hooks";
import { ApiError, call, followBuildLog, type BuildLogLine, type Template, type TemplateVersion } from "./api";
import { bytes, when } from "./format";
import { ActionDialog, ErrorBox, useInterval, useLoad } from "./ui";

function Status({ status }: { status: string }) {
  return <span class={`pill pill-${status}`} data-status={status}>{status}</span>;
}

export function TemplatesPage() {
  const list = useLoad(() => call<{ rows: Template[] }>("GET", "/v1/templates"), []);
  useInterval(() => void list.reload(), 3000, !!list.data?.rows.some((t) => t.status === "building"));
  return (
    <main id="main">
      <h1 tabIndex={-1}>Templates</h1>
      <ErrorBox error={list.error} />
      <div class="table-wrap">
        <table class="templates">
          <thead><tr><th scope="col">Template</th><th scope="col">Status</th><th scope="col">Version</th><th scope="col">Size</th><th scope="col">Built</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {list.data?.rows.map((t) => (
              <tr key={t.slug} data-slug={t.slug}>
                <td data-label="Template"><span><a href={`/template/${encodeURIComponent(t.slug)}`} data-nav>{t.slug}</a>{t.default && <span class="pill">default</span>}</span></td>
                <td data-label="Status"><div><Status status={t.status} />{t.progress && <div class="muted">{t.progress}</div>}{t.error && <div class="error-text">{t.error}</div>}</div></td>
                <td data-label="Version">{t.version ? `v${t.version}` : "—"}</td>
                <td data-label="Size">{bytes(t.size_bytes)}</td>
                <td data-label="Built">{when(t.created_at)}</td>
                <td data-label=""><a href={`/new?template=${encodeURIComponent(t.slug)}`} data-nav aria-label={`New sandbox from ${t.slug}`}>New sandbox</a></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </main>
  );
}

export function TemplatePage({ slug }: { slug: string }) {
  const tpl = useLoad(() => call<Template>("GET", `/v1/templates/${encodeURIComponent(slug)}`), [slug]);
  const versions = useLoad(() => call<{ rows: TemplateVersion[] }>("GET", `/v1/templates/${encodeURIComponent(slug)}/versions`), [slug]);
  const [build, setBuild] = useState(false);
  const building = !!versions.data?.rows.some((v) => v.status === "building");
  useInterval(() => { void versions.reload(); void tpl.reload(); }, 2000, building);
  return (
    <main id="main">
      <div class="page-head">
        <h1 tabIndex={-1}>Template {slug}</h1>
        <div class="actions">
          <a href={`/new?template=${encodeURIComponent(slug)}`} data-nav class="button secondary">New sandbox</a>
          <button type="button" onClick={() => setBuild(true)} disabled={building}>{building ? "Building…" : "Build a new version"}</button>
        </div>
      </div>
      <ErrorBox error={tpl.error ?? versions.error} />
      {tpl.data && <p>Status <Status status={tpl.data.status} /> {tpl.data.version ? `· newest ready v${tpl.data.version}` : ""} · <a href="/template" data-nav>All templates</a></p>}
      <h2>Builds</h2>
      {versions.data?.rows.length === 0 && <p class="muted">No recorded builds: this template is provided by the host.</p>}
      <ol class="builds">
        {versions.data?.rows.map((v) => (
          <li key={v.id} class="card inner" data-version={v.version}>
            <div class="row">
              <strong>v{v.version}</strong> <Status status={v.status} /> <span class="mono muted">{v.id}</span>
              <span class="muted">{bytes(v.size_bytes)}</span>
            </div>
            <p class="muted">Started {when(v.created_at)} · last change {when(v.updated_at)}</p>
            {(v.progress || v.error) && (
              <pre class="log" aria-label={`Progress of v${v.version}`}>{[v.progress, v.error && `error: ${v.error}`].filter(Boolean).join("\n")}</pre>
            )}
            {v.build_id && <BuildLog slug={slug} buildId={v.build_id} version={v.version} />}
          </li>
        ))}
      </ol>
      {build && (
        <ActionDialog title={`Build a new version of ${slug}?`} confirmLabel="Build" busyLabel="Starting the build…" onClose={() => setBuild(false)}
          onConfirm={async () => {
            await call("POST", `/v1/templates/${encodeURIComponent(slug)}/builds`);
            await versions.reload();
          }}>
          <p>Running sandboxes keep their version; new sandboxes get the new one once it is ready.</p>
        </ActionDialog>
      )}
    </main>
  );
}

/** How one log line reads: as `pt template build` prints it. */
function logText(l: BuildLogLine): string {
  switch (l.type) {
    case "step": return `Step ${l.step}/${l.steps} (line ${l.line}): ${l.instruction}`;
    case "cache": return l.cached ? "  cached" : `  done in ${l.duration_ms ?? 0} ms`;
    case "output": return (l.text ?? "").replace(/\n$/, "");
    case "pull": return `pull ${l.layer}${l.cached ? " (stored already)" : `: ${bytes(l.bytes ?? 0)} of ${bytes(l.total ?? 0)}`}`;
    case "error": return `error: ${l.text ?? ""}${l.exit_code !== undefined ? ` (exit ${l.exit_code})` : ""}`;
    case "done": return `build ${l.status}`;
    default: return l.text ?? "";
  }
}

/** A build's log, read (and followed while it runs) once it is opened. */
function BuildLog({ slug, buildId, version }: { slug: string; buildId: string; version: number }) {
  const [open, setOpen] = useState(false);
  const [lines, setLines] = useState<BuildLogLine[]>([]);
  const [error, setError] = useState<ApiError | undefined>();
  useEffect(() => {
    if (!open) return;
    setLines([]);
    setError(undefined);
    // Pull lines repeat a layer's progress: keep the newest of each.
    return followBuildLog(slug, buildId, (l) => setLines((ls) => {
      const i = l.type === "pull" ? ls.findIndex((x) => x.type === "pull" && x.layer === l.layer) : -1;
      return i < 0 ? [...ls, l] : [...ls.slice(0, i), l, ...ls.slice(i + 1)];
    }), setError);
  }, [open, slug, buildId]);
  return (
    <details class="build-log" data-build={buildId} onToggle={(e) => setOpen((e.currentTarget as HTMLDetailsElement).open)}>
      <summary>Build log <span class="mono muted">{buildId}</span></summary>
      <ErrorBox error={error} />
      <pre class="log" aria-label={`Build log of v${version}`} aria-live="polite">{lines.map(logText).join("\n")}</pre>
    </details>
  );
}
