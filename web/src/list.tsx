// The sandbox list (/): the API's filters (state, parent or top-level only,
// project, metadata) kept in the URL, children under their parents, states
// and statuses kept live by the event stream.
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
import { call, states, type Project, type Sandbox, type SandboxState } from "./api";
import { SandboxActions, type Notice } from "./actions";
import { plural } from "./format";
import { navigate } from "./router";
import { getSandbox, putAll, useAppeared, useStateEvents, useStore } from "./store";
import { ErrorBox, StateBadge, useInterval, useLoad } from "./ui";

const pageSize = 200;

export interface Filters {
  state: string;
  parent: string; // "" any, "none" top-level only, else a sandbox ID
  project: string;
  metadata: string[]; // KEY=VALUE
}

export function filtersFrom(q: URLSearchParams): Filters {
  return { state: q.get("state") ?? "", parent: q.get("parent") ?? "", project: q.get("project") ?? "", metadata: q.getAll("metadata") };
}

function toURL(f: Filters): string {
  const q = new URLSearchParams();
  if (f.state) q.set("state", f.state);
  if (f.parent) q.set("parent", f.parent);
  if (f.project) q.set("project", f.project);
  for (const m of f.metadata) q.append("metadata", m);
  const s = q.toString();
  return s ? `/?${s}` : "/";
}

/** The API query for the filters (GET /v1/sandboxes). */
function toAPI(f: Filters): string {
  const q = new URLSearchParams({ limit: String(pageSize), include: "failed" });
  if (f.state) q.set("state", f.state);
  if (f.parent === "none") q.set("roots_only", "true");
  else if (f.parent) q.set("parent_id", f.parent);
  if (f.project) q.set("project_id", f.project);
  for (const m of f.metadata) {
    const i = m.indexOf("=");
    if (i > 0) q.append(`metadata[${m.slice(0, i)}]`, m.slice(i + 1));
  }
  return `/v1/sandboxes?${q}`;
}

/** Parents first, each followed by its children, newest first at each level. */
function treeOrder(rows: Sandbox[]): { s: Sandbox; depth: number }[] {
  const ids = new Set(rows.map((s) => s.id));
  const kids = new Map<string, Sandbox[]>();
  const roots: Sandbox[] = [];
  for (const s of rows) {
    if (s.parent_id && ids.has(s.parent_id)) {
      const l = kids.get(s.parent_id) ?? [];
      l.push(s);
      kids.set(s.parent_id, l);
    } else roots.push(s);
  }
  const out: { s: Sandbox; depth: number }[] = [];
  const walk = (s: Sandbox, depth: number) => {
    out.push({ s, depth });
    for (const c of kids.get(s.id) ?? []) walk(c, depth + 1);
  };
  for (const r of roots) walk(r, 0);
  return out;
}

function FilterForm({ f, projects }: { f: Filters; projects: Project[] }) {
  const [tree, setTree] = useState(f.parent === "" ? "" : f.parent === "none" ? "none" : "children");
  const [parent, setParent] = useState(f.parent !== "none" ? f.parent : "");
  const [meta, setMeta] = useState(f.metadata.join(", "));
  useEffect(() => {
    setTree(f.parent === "" ? "" : f.parent === "none" ? "none" : "children");
    setParent(f.parent !== "none" ? f.parent : "");
    setMeta(f.metadata.join(", "));
  }, [toURL(f)]);
  const apply = (over: Partial<Filters> = {}) => {
    const next: Filters = {
      ...f,
      parent: tree === "none" ? "none" : tree === "children" ? parent.trim() : "",
      metadata: meta.split(",").map((m) => m.trim()).filter(Boolean),
      ...over,
    };
    navigate(toURL(next));
  };
  return (
    <form class="filters" aria-label="Filter sandboxes" onSubmit={(e) => { e.preventDefault(); apply(); }}>
      <div class="field">
        <label for="f-state">State</label>
        <select id="f-state" name="state" value={f.state} onChange={(e) => apply({ state: e.currentTarget.value })}>
          <option value="">All</option>
          {states.map((s) => <option key={s} value={s}>{s}</option>)}
        </select>
      </div>
      <div class="field">
        <label for="f-tree">Parent</label>
        <select id="f-tree" name="tree" value={tree} onChange={(e) => {
          const v = e.currentTarget.value;
          setTree(v);
          if (v !== "children") apply({ parent: v });
        }}>
          <option value="">Any</option>
          <option value="none">Top-level only</option>
          <option value="children">Children of…</option>
        </select>
      </div>
      {tree === "children" && (
        <div class="field">
          <label for="f-parent">Parent ID</label>
          <input id="f-parent" name="parent" value={parent} placeholder="sbx_…" autoComplete="off" required
            onInput={(e) => setParent(e.currentTarget.value)} />
        </div>
      )}
      <div class="field">
        <label for="f-project">Project</label>
        <select id="f-project" name="project" value={f.project} onChange={(e) => apply({ project: e.currentTarget.value })}>
          <option value="">All projects</option>
          {projects.map((p) => <option key={p.id} value={p.id}>{p.name}{p.default ? " (default)" : ""}</option>)}
        </select>
      </div>
      <div class="field">
        <label for="f-meta">Metadata</label>
        <input id="f-meta" name="metadata" value={meta} placeholder="key=value, …" autoComplete="off"
          onInput={(e) => setMeta(e.currentTarget.value)} />
      </div>
      <div class="field buttons">
        <button type="submit">Apply</button>
        <button type="button" class="secondary" onClick={() => navigate("/")}>Clear</button>
      </div>
    </form>
  );
}

export function ListPage({ query }: { query: URLSearchParams }) {
  useStore();
  const f = filtersFrom(query);
  const key = toAPI(f);
  // The rows of the query last answered: rows of another filter are never shown.
  const [loaded, setLoaded] = useState<{ key: string; ids: string[] } | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const projects = useLoad(() => call<{ rows: Project[] }>("GET", "/v1/projects"), []);
  const gen = useRef(0);

  const load = useCallback(async () => {
    const g = ++gen.current;
    try {
      const r = await call<{ rows: Sandbox[] }>("GET", key);
      if (g !== gen.current) return;
      putAll(r.rows);
      setLoaded({ key, ids: r.rows.map((s) => s.id) });
      setError(null);
    } catch (e) {
      if (g === gen.current) setError(e);
    }
  }, [key]);
  useEffect(() => {
    void load();
  }, [load]);
  const ids = loaded?.key === key ? loaded.ids : null;

  // A sandbox this list does not show may now belong in it: reload once
  // soon (events come in bursts).
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null);
  const reloadSoon = useCallback(() => {
    if (timer.current) return;
    timer.current = setTimeout(() => {
      timer.current = null;
      void load();
    }, 400);
  }, [load]);
  useEffect(() => () => { if (timer.current) clearTimeout(timer.current); }, []);
  useAppeared(reloadSoon);
  useStateEvents(useCallback((id: string, to: SandboxState) => {
    if (f.state === to && !ids?.includes(id)) reloadSoon();
  }, [f.state, ids, reloadSoon]));
  // Statuses (ready, idle, expiring) follow activity and TTLs, which have
  // no event: read the list again now and then.
  useInterval(() => void load(), 30_000, true);

  const rows = (ids ?? []).map((id) => getSandbox(id)).filter((s): s is Sandbox =>
    !!s && s.state !== "deleted" && (!f.state || s.state === f.state));
  const projectName = (id?: string) => projects.data?.rows.find((p) => p.id === id)?.name ?? id ?? "—";
  const filtered = f.state || f.parent || f.project || f.metadata.length;
  return (
    <main id="main">
      <div class="page-head">
        <h1 tabIndex={-1}>Sandboxes</h1>
        <a href="/new" data-nav class="button">New sandbox</a>
      </div>
      <FilterForm f={f} projects={projects.data?.rows ?? []} />
      <ErrorBox error={error} />
      <div role="status" class="notice" aria-live="polite">
        {notice && <>{notice.text} {notice.links?.map((l) => <a key={l.href} href={l.href} data-nav class="notice-link">{l.label}</a>)}</>}
      </div>
      <p class="muted" aria-live="polite">
        {ids === null ? "Loading…" : `${plural(rows.length, "sandbox", "sandboxes")}${filtered ? " match" : ""}${ids.length >= pageSize ? ` (the first ${pageSize})` : ""}`}
      </p>
      <div class="table-wrap">
        <table class="sandboxes" aria-busy={ids === null}>
          <thead>
            <tr>
              <th scope="col">Sandbox</th><th scope="col">State</th><th scope="col">Status</th>
              <th scope="col">Template</th><th scope="col">Size</th><th scope="col">Project</th>
              <th scope="col">Parent</th><th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {treeOrder(rows.sort((a, b) => (a.created_at < b.created_at ? 1 : -1))).map(({ s, depth }) => (
              <tr key={s.id} data-id={s.id} class={depth ? "child" : ""}>
                <td data-label="Sandbox">
                  <div class={`tree d${Math.min(depth, 4)}`}>
                    {depth > 0 && <span class="tree-mark" aria-hidden="true">└</span>}
                    <div>
                      <a href={`/sandbox/${encodeURIComponent(s.id)}`} data-nav>{s.name ?? s.id}</a>
                      {s.name && <div class="muted mono">{s.id}</div>}
                    </div>
                  </div>
                </td>
                <td data-label="State"><StateBadge state={s.state} /></td>
                <td data-label="Status" data-status={s.status ?? ""}>{s.status ?? "—"}</td>
                <td data-label="Template">{s.template}{s.template_version ? ` v${s.template_version}` : ""}</td>
                <td data-label="Size" class="nowrap">{`${s.cpu} vCPU · ${s.ram_mb} MB · ${s.disk_gb} GB`}</td>
                <td data-label="Project">{projectName(s.project_id)}</td>
                <td data-label="Parent">{s.parent_id
                  ? <a href={`/sandbox/${encodeURIComponent(s.parent_id)}`} data-nav
                    class={getSandbox(s.parent_id)?.name ? "" : "mono"}>{getSandbox(s.parent_id)?.name ?? s.parent_id}</a> : "—"}</td>
                <td data-label="Actions"><SandboxActions s={s} which={["stop", "start", "delete"]} onDone={setNotice} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </main>
  );
}
