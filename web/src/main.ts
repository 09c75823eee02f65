// Platinum's dashboard: sign in with an API token, watch sandboxes change
// state live through GET /v1/events, create, stop, start and delete them,
// and browse one sandbox's details, metrics and files (docs/dashboard.md).
import "./style.css";
import {
  ApiError, call, filesPath, followEvents, getToken, raw, sandboxPath, setToken, states,
  type FileEntry, type Metrics, type Sandbox, type SandboxState,
} from "./api";
import { bytes, confirmDialog, h, parsePairs } from "./dom";

const app = document.getElementById("app")!;

// ---- shared state -------------------------------------------------------

const sandboxes = new Map<string, Sandbox>();
let stopEvents: (() => void) | null = null;
let live = false;
let rerender: () => void = () => {};
let listStale = false;
// How many state events each sandbox has had: an action's answer (say
// `starting`) is older than an event that arrived while it was in flight
// (`running`), so it must not overwrite the state then.
const eventCount = new Map<string, number>();

/** Applies a record the API answered, unless an event overtook it. */
function applyAnswer(s: Sandbox, seenBefore: number): void {
  const cur = sandboxes.get(s.id);
  const overtaken = (eventCount.get(s.id) ?? 0) !== seenBefore;
  if (cur && overtaken) Object.assign(cur, { ...s, state: cur.state });
  else if (!overtaken || !cur) sandboxes.set(s.id, cur ? Object.assign(cur, s) : s);
  rerender();
}

function describe(e: unknown): string {
  return e instanceof ApiError ? e.describe() : (e as Error).message;
}

function alertBox(): HTMLElement {
  return h("p", { className: "error", role: "alert", hidden: true });
}

function showError(box: HTMLElement, e: unknown): void {
  box.textContent = describe(e);
  box.hidden = false;
}

async function loadSandboxes(): Promise<void> {
  const list = await call<{ rows: Sandbox[] }>("GET", "/v1/sandboxes?limit=200&include=failed");
  sandboxes.clear();
  for (const s of list.rows) sandboxes.set(s.id, s);
}

/** Starts following the org's state changes (once per sign-in). */
function startEvents(): void {
  stopEvents?.();
  stopEvents = followEvents("state_changed", (ev) => {
    if (!ev.sandbox_id) return;
    eventCount.set(ev.sandbox_id, (eventCount.get(ev.sandbox_id) ?? 0) + 1);
    const to = ev.data["to"] as SandboxState | undefined;
    const s = sandboxes.get(ev.sandbox_id);
    if (s && to) {
      if (to === "deleted") sandboxes.delete(s.id);
      else s.state = to;
      rerender();
    } else if (!s && to && to !== "deleted" && to !== "deleting") {
      refreshSoon();
    }
  }, (connected, err) => {
    live = connected;
    if (err?.status === 401) return signOut(err.describe());
    const dot = document.getElementById("live");
    if (dot) {
      dot.textContent = connected ? "live" : "reconnecting…";
      dot.className = connected ? "live on" : "live";
    }
  });
}

/** Reloads the list once soon: a sandbox appeared that the page does not know. */
function refreshSoon(): void {
  if (listStale) return;
  listStale = true;
  setTimeout(async () => {
    listStale = false;
    try {
      await loadSandboxes();
      rerender();
    } catch {
      // the next event retries
    }
  }, 300);
}

function signOut(message?: string): void {
  stopEvents?.();
  stopEvents = null;
  setToken(null);
  sandboxes.clear();
  navigate("/", true);
  if (message) {
    const box = document.querySelector<HTMLElement>("#signin-error");
    if (box) {
      box.textContent = message;
      box.hidden = false;
    }
  }
}

// ---- routing --------------------------------------------------------------

function navigate(path: string, replace = false): void {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  void route();
}

window.addEventListener("popstate", () => void route());
document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a[data-nav]");
  if (a instanceof HTMLAnchorElement && !e.ctrlKey && !e.metaKey && !e.shiftKey) {
    e.preventDefault();
    navigate(a.pathname);
  }
});

async function route(): Promise<void> {
  rerender = () => {};
  if (!getToken()) return signInView();
  if (!stopEvents) startEvents();
  const m = location.pathname.match(/^\/sandbox\/([^/]+)$/);
  if (m) return sandboxView(decodeURIComponent(m[1]));
  return listView();
}

function shell(title: string, ...body: Node[]): void {
  app.replaceChildren(
    h("header", { className: "top" },
      h("a", { href: "/", "data-nav": true, className: "brand" }, "Platinum"),
      h("span", { id: "live", className: live ? "live on" : "live", "aria-live": "polite" }, live ? "live" : "connecting…"),
      h("button", { type: "button", className: "link", onclick: () => signOut() }, "Sign out")),
    h("main", {}, h("h1", {}, title), ...body),
  );
}

// ---- sign in --------------------------------------------------------------

function signInView(): void {
  const err = h("p", { id: "signin-error", className: "error", role: "alert", hidden: true });
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true });
  const button = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { className: "card signin" },
    h("h1", {}, "Sign in to Platinum"),
    h("p", {}, "Paste an API token (", h("code", {}, "pt token create"), " or the admin token ptd printed on first start)."),
    h("label", { for: "token" }, "API token"), input, button, err);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    button.disabled = true;
    err.hidden = true;
    setToken(input.value.trim());
    try {
      await loadSandboxes();
      navigate(location.pathname, true);
    } catch (e2) {
      setToken(null);
      showError(err, e2);
      button.disabled = false;
      input.focus();
    }
  });
  app.replaceChildren(h("main", { className: "center" }, form));
  input.focus();
}

// ---- sandbox list ---------------------------------------------------------

const filter = { state: "" };

function stateBadge(s: SandboxState): HTMLElement {
  return h("span", { className: `state state-${s}`, "data-state": s }, s);
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

function actionButtons(s: Sandbox, err: HTMLElement, after?: () => void): HTMLElement {
  const wrap = h("div", { className: "actions" });
  const act = (label: string, busy: string, fn: () => Promise<unknown>, danger = false) => {
    const b = h("button", { type: "button", className: danger ? "danger" : "", "aria-label": `${label} ${s.name ?? s.id}` }, label);
    b.addEventListener("click", async () => {
      err.hidden = true;
      b.disabled = true;
      b.textContent = busy;
      try {
        await fn();
        after?.();
      } catch (e) {
        showError(err, e);
      } finally {
        b.disabled = false;
        b.textContent = label;
      }
    });
    wrap.append(b);
  };
  const post = async (verb: string) => {
    const seen = eventCount.get(s.id) ?? 0;
    applyAnswer(await call<Sandbox>("POST", `${sandboxPath(s.id)}/${verb}`), seen);
  };
  if (s.state === "running") act("Stop", "Stopping…", () => post("stop"));
  if (s.state === "stopped" || s.state === "archived" || s.state === "failed") {
    act("Start", "Starting…", () => post("start"));
  }
  if (s.state !== "deleting") {
    act("Delete", "Deleting…", async () => {
      if (!(await confirmDialog(`Delete ${s.name ?? s.id}? Its disk and snapshots go too.`, "Delete"))) return;
      const seen = eventCount.get(s.id) ?? 0;
      await call<unknown>("DELETE", sandboxPath(s.id));
      const cur = sandboxes.get(s.id);
      if (cur && (eventCount.get(s.id) ?? 0) === seen) cur.state = "deleting";
      rerender();
    }, true);
  }
  return wrap;
}

function createForm(err: HTMLElement): HTMLElement {
  const field = (id: string, label: string, input: HTMLElement) =>
    h("div", { className: "field" }, h("label", { for: id }, label), input);
  const tpl = h("input", { id: "c-template", name: "template", list: "templates", value: "busybox", required: true });
  const name = h("input", { id: "c-name", name: "name", placeholder: "optional" });
  const cpu = h("input", { id: "c-cpu", name: "cpu", type: "number", min: "0.1", step: "0.1", value: "1" });
  const ram = h("input", { id: "c-ram", name: "ram_mb", type: "number", min: "128", step: "64", value: "512" });
  const disk = h("input", { id: "c-disk", name: "disk_gb", type: "number", min: "1", value: "2" });
  const env = h("textarea", { id: "c-env", name: "env", rows: 2, placeholder: "KEY=value, one a line" });
  const meta = h("textarea", { id: "c-meta", name: "metadata", rows: 2, placeholder: "key=value, one a line" });
  const list = h("datalist", { id: "templates" });
  call<{ rows: { slug: string }[] }>("GET", "/v1/templates").then((r) => {
    for (const t of r.rows ?? []) list.append(h("option", { value: t.slug }));
  }).catch(() => {});
  const submit = h("button", { type: "submit" }, "Create sandbox");
  const form = h("form", { className: "card create", "aria-label": "Create a sandbox" },
    h("h2", {}, "New sandbox"),
    h("div", { className: "grid" },
      field("c-template", "Template", tpl), field("c-name", "Name", name),
      field("c-cpu", "vCPUs", cpu), field("c-ram", "RAM (MB)", ram), field("c-disk", "Disk (GB)", disk),
      field("c-env", "Environment", env), field("c-meta", "Metadata", meta)),
    list, submit);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    err.hidden = true;
    submit.disabled = true;
    submit.textContent = "Creating…";
    try {
      const body: Record<string, unknown> = {
        template: tpl.value.trim(),
        cpu: Number(cpu.value),
        ram_mb: Number(ram.value),
        disk_gb: Number(disk.value),
      };
      if (name.value.trim()) body.name = name.value.trim();
      const envs = parsePairs(env.value, "Environment");
      if (Object.keys(envs).length) body.env = envs;
      const md = parsePairs(meta.value, "Metadata");
      if (Object.keys(md).length) body.metadata = md;
      const s = await call<Sandbox>("POST", "/v1/sandboxes", body);
      applyAnswer(s, 0);
      name.value = "";
    } catch (e2) {
      showError(err, e2);
    } finally {
      submit.disabled = false;
      submit.textContent = "Create sandbox";
    }
  });
  return form;
}

async function listView(): Promise<void> {
  const err = alertBox();
  const sel = h("select", { id: "state-filter", name: "state" },
    h("option", { value: "" }, "All states"),
    ...states.map((s) => h("option", { value: s, selected: filter.state === s }, s)));
  sel.addEventListener("change", () => {
    filter.state = sel.value;
    draw();
  });
  const tbody = h("tbody");
  const count = h("p", { className: "muted", "aria-live": "polite" });
  const table = h("table", { className: "sandboxes" },
    h("thead", {}, h("tr", {},
      h("th", { scope: "col" }, "Sandbox"), h("th", { scope: "col" }, "State"),
      h("th", { scope: "col" }, "Template"), h("th", { scope: "col" }, "Size"),
      h("th", { scope: "col" }, "Parent"), h("th", { scope: "col" }, "Actions"))),
    tbody);
  const draw = () => {
    const rows = [...sandboxes.values()]
      .filter((s) => !filter.state || s.state === filter.state)
      .sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    tbody.replaceChildren(...treeOrder(rows).map(({ s, depth }) =>
      h("tr", { "data-id": s.id, className: depth ? "child" : "" },
        h("td", { "data-label": "Sandbox" }, h("div", {},
          depth ? h("span", { className: "indent", "aria-label": "child of" }, "└ ".padStart(depth * 2 + 2, " ")) : null,
          h("a", { href: `/sandbox/${encodeURIComponent(s.id)}`, "data-nav": true }, s.name ?? s.id),
          s.name ? h("div", { className: "muted mono" }, s.id) : null)),
        h("td", { "data-label": "State" }, stateBadge(s.state)),
        h("td", { "data-label": "Template" }, s.template),
        h("td", { "data-label": "Size" }, `${s.cpu} vCPU · ${s.ram_mb} MB · ${s.disk_gb} GB`),
        h("td", { "data-label": "Parent", className: "mono" }, s.parent_id
          ? h("a", { href: `/sandbox/${encodeURIComponent(s.parent_id)}`, "data-nav": true }, s.parent_id) : "—"),
        h("td", { "data-label": "Actions" }, actionButtons(s, err)))));
    count.textContent = `${rows.length} sandbox${rows.length === 1 ? "" : "es"}`;
  };
  shell("Sandboxes", createForm(err), err,
    h("div", { className: "toolbar" }, h("label", { for: "state-filter" }, "State"), sel, count),
    h("div", { className: "table-wrap" }, table));
  rerender = draw;
  draw();
  try {
    await loadSandboxes();
    draw();
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return signOut(e.describe());
    showError(err, e);
  }
}

// ---- one sandbox ------------------------------------------------------------

async function sandboxView(id: string): Promise<void> {
  const err = alertBox();
  const details = h("dl", { className: "details" });
  const actions = h("div");
  const metrics = h("dl", { className: "metrics" });
  const metricsMsg = h("p", { className: "muted" });
  const files = h("section", { className: "card", "aria-labelledby": "files-h" });
  let sb: Sandbox | undefined;
  let filesPathNow = "/";

  const drawDetails = () => {
    if (!sb) return;
    const rows: [string, Node | string][] = [
      ["ID", h("span", { className: "mono" }, sb.id)],
      ["State", stateBadge(sb.state)],
      ["Template", sb.template],
      ["Runtime", sb.runtime ?? "—"],
      ["Size", `${sb.cpu} vCPU · ${sb.ram_mb} MB RAM · ${sb.disk_gb} GB disk`],
      ["Parent", sb.parent_id ? h("a", { href: `/sandbox/${encodeURIComponent(sb.parent_id)}`, "data-nav": true }, sb.parent_id) : "—"],
      ["Environment", sb.env_keys.length ? sb.env_keys.join(", ") : "—"],
      ["Metadata", Object.keys(sb.metadata).length
        ? Object.entries(sb.metadata).map(([k, v]) => `${k}=${v}`).join(", ") : "—"],
      ["Created", new Date(sb.created_at).toLocaleString()],
    ];
    if (sb.reason) rows.push(["Reason", sb.reason]);
    details.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    actions.replaceChildren(actionButtons(sb, err, () => void reload()));
  };

  const loadMetrics = async () => {
    if (sb?.state !== "running") {
      metrics.replaceChildren();
      metricsMsg.textContent = "Metrics are read while the sandbox runs.";
      return;
    }
    try {
      const m = await call<Metrics>("GET", `${sandboxPath(id)}/metrics`);
      metricsMsg.textContent = `Read at ${new Date(m.at).toLocaleTimeString()}`;
      const rows: [string, string][] = [
        ["CPU", `${m.cpu_percent.toFixed(1)} %`],
        ["Memory", `${bytes(m.memory_used_bytes)} of ${bytes(m.memory_limit_bytes)}`],
        ["Disk", `${bytes(m.disk_used_bytes)} of ${bytes(m.disk_size_bytes)}`],
        ["Network in / out", `${bytes(m.net_rx_bytes)} / ${bytes(m.net_tx_bytes)}`],
        ["Processes", String(m.pids ?? "—")],
      ];
      metrics.replaceChildren(...rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
    } catch (e) {
      metrics.replaceChildren();
      metricsMsg.textContent = describe(e);
    }
  };

  const loadFiles = async (path: string) => {
    const ferr = alertBox();
    const pathInput = h("input", { id: "f-path", name: "path", value: path });
    const go = h("form", { className: "row" }, h("label", { for: "f-path" }, "Path"), pathInput,
      h("button", { type: "submit" }, "Open"));
    go.addEventListener("submit", (e) => {
      e.preventDefault();
      void loadFiles(pathInput.value || "/");
    });
    const upload = h("input", { id: "f-upload", type: "file", name: "upload" });
    const upForm = h("form", { className: "row" }, h("label", { for: "f-upload" }, "Upload here"), upload,
      h("button", { type: "submit" }, "Upload"));
    const list = h("ul", { className: "files" });
    files.replaceChildren(h("h2", { id: "files-h" }, "Files"), go, upForm, ferr, list);
    if (sb?.state !== "running") {
      list.append(h("li", { className: "muted" }, "Files can be read while the sandbox runs."));
      return;
    }
    filesPathNow = path;
    const join = (name: string) => (path.endsWith("/") ? path : path + "/") + name;
    upForm.addEventListener("submit", async (e) => {
      e.preventDefault();
      const f = upload.files?.[0];
      if (!f) return;
      try {
        await raw("PUT", filesPath(id, join(f.name)), f, "application/octet-stream");
        await loadFiles(path);
      } catch (e2) {
        showError(ferr, e2);
      }
    });
    try {
      const r = await call<{ entries: FileEntry[] }>("GET", filesPath(id, path));
      const entries = [...r.entries].sort((a, b) =>
        a.type === b.type ? a.name.localeCompare(b.name) : a.type === "dir" ? -1 : 1);
      if (path !== "/") {
        const up = path.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";
        list.append(h("li", {}, h("button", { type: "button", className: "link", onclick: () => void loadFiles(up) }, "..")));
      }
      for (const f of entries) {
        const del = h("button", { type: "button", className: "danger small", "aria-label": `Delete ${f.name}` }, "Delete");
        del.addEventListener("click", async () => {
          if (!(await confirmDialog(`Delete ${f.path}?`, "Delete"))) return;
          try {
            await raw("DELETE", filesPath(id, f.path));
            await loadFiles(path);
          } catch (e2) {
            showError(ferr, e2);
          }
        });
        const nameEl = f.type === "dir"
          ? h("button", { type: "button", className: "link", onclick: () => void loadFiles(f.path) }, `${f.name}/`)
          : h("button", {
            type: "button", className: "link", "aria-label": `Download ${f.name}`,
            onclick: async () => {
              try {
                const blob = await (await raw("GET", filesPath(id, f.path))).blob();
                const url = URL.createObjectURL(blob);
                const a = h("a", { href: url, download: f.name });
                document.body.append(a);
                a.click();
                a.remove();
                setTimeout(() => URL.revokeObjectURL(url), 10000);
              } catch (e2) {
                showError(ferr, e2);
              }
            },
          }, f.name);
        list.append(h("li", { "data-name": f.name },
          nameEl, h("span", { className: "muted mono" }, f.mode), h("span", { className: "muted" }, f.type === "dir" ? "" : bytes(f.size)), del));
      }
    } catch (e) {
      showError(ferr, e);
    }
  };

  const reload = async () => {
    try {
      sb = await call<Sandbox>("GET", sandboxPath(id));
      sandboxes.set(id, sb);
      drawDetails();
      await loadMetrics();
      await loadFiles(filesPathNow);
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) return signOut(e.describe());
      showError(err, e);
    }
  };

  const refresh = h("button", { type: "button", onclick: () => void loadMetrics() }, "Refresh metrics");
  shell(id, err,
    h("section", { className: "card", "aria-labelledby": "details-h" }, h("h2", { id: "details-h" }, "Details"), details, actions),
    h("section", { className: "card", "aria-labelledby": "metrics-h" }, h("h2", { id: "metrics-h" }, "Metrics"), metrics, metricsMsg, refresh),
    files,
    h("section", { className: "card", "aria-labelledby": "term-h" }, h("h2", { id: "term-h" }, "Terminal"),
      h("p", { className: "muted" }, "A browser terminal is coming; until then use ", h("code", {}, `pt sandbox exec ${id} -- sh`), ".")));
  let lastState: SandboxState | undefined;
  rerender = () => {
    const cur = sandboxes.get(id);
    if (!cur) {
      if (sb) sb.state = "deleted";
      drawDetails();
      return;
    }
    sb = cur;
    drawDetails();
    if (cur.state !== lastState) {
      lastState = cur.state;
      void loadMetrics();
      void loadFiles(filesPathNow);
    }
  };
  await reload();
  lastState = sb?.state;
}

void route();
