// One sandbox's page (/sandbox/{id}[/tab]): its state and actions on top,
// then tabs: overview (details, live metrics, billed usage), terminal,
// files, snapshots, preview URLs and its events.
import { useEffect, useState } from "preact/hooks";
import {
  ApiError, call, followEvents, sandboxPath, transitional, type Event, type PreviewURL, type Sandbox,
  type Snapshot, type Usage,
} from "./api";
import { Progress, SandboxActions, type Notice } from "./actions";
import { MetricsCharts } from "./charts";
import { FilesView } from "./files";
import { bytes, plural, when } from "./format";
import { getSandbox, put, refresh, useStore } from "./store";
import { ActionDialog, Copy, Details, ErrorBox, Field, StateBadge, useInterval, useLoad } from "./ui";

const tabs: [string, string][] = [
  ["overview", "Overview"], ["terminal", "Terminal"], ["files", "Files"],
  ["snapshots", "Snapshots"], ["previews", "Preview URLs"], ["events", "Events"],
];

export function SandboxPage({ id, tab }: { id: string; tab: string }) {
  useStore();
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const [changes, setChanges] = useState(0); // bumped by actions, for tabs that list their results
  const s = getSandbox(id);

  useEffect(() => {
    setNotice(null);
    refresh(id).catch(setError);
  }, [id]);
  // While it is on its way somewhere, read it often: archive and restore
  // report byte progress, which has no event.
  useInterval(() => void refresh(id).catch(() => {}), 1500, !!s && transitional.has(s.state));

  if (!s) {
    return (
      <main id="main">
        <h1 tabIndex={-1}>{id}</h1>
        {error ? <ErrorBox error={error} /> : <p class="muted">Loading…</p>}
        <p><a href="/" data-nav>Back to the sandboxes</a></p>
      </main>
    );
  }
  const base = `/sandbox/${encodeURIComponent(id)}`;
  const done = (n: Notice) => {
    setNotice(n);
    setChanges((c) => c + 1);
  };
  return (
    <main id="main">
      <div class="page-head">
        <div>
          <h1 tabIndex={-1}>{s.name ?? s.id}</h1>
          <p class="muted mono">{s.id}</p>
        </div>
        <div class="head-state">
          <StateBadge state={s.state} />
          {s.status && <span class="muted" data-status={s.status}>status: {s.status}</span>}
        </div>
      </div>
      <ErrorBox error={error} />
      {s.state === "deleted"
        ? <p role="status">This sandbox was deleted. <a href="/" data-nav>Back to the sandboxes</a></p>
        : <SandboxActions s={s} which={["stop", "start", "archive", "snapshot", "fork", "resize", "delete"]} onDone={done} />}
      <Progress s={s} />
      {s.reason && <p class="muted">Reason: {s.reason}</p>}
      <div role="status" class="notice" aria-live="polite">
        {notice && <>
          {notice.text}{" "}
          {notice.links?.map((l) => <a key={l.href} href={l.href} data-nav class="notice-link">{l.label}</a>)}
        </>}
      </div>
      <nav class="tabs" aria-label="Sandbox sections">
        {tabs.map(([t, name]) => (
          <a key={t} href={t === "overview" ? base : `${base}/${t}`} data-nav aria-current={tab === t ? "page" : undefined}>{name}</a>
        ))}
      </nav>
      <section class="card" aria-label={tabs.find(([t]) => t === tab)?.[1] ?? "Overview"}>
        {tab === "terminal" ? <LazyTerminal s={s} />
          : tab === "files" ? <FilesView s={s} />
          : tab === "snapshots" ? <SnapshotsView s={s} changes={changes} onDone={done} />
          : tab === "previews" ? <PreviewsView s={s} />
          : tab === "events" ? <EventsView s={s} />
          : <Overview s={s} />}
      </section>
    </main>
  );
}

type TerminalView = typeof import("./terminal").TerminalView;

// xterm.js is most of the dashboard's code: it loads with the first
// terminal opened, not with the page.
function LazyTerminal({ s }: { s: Sandbox }) {
  const [View, setView] = useState<TerminalView | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    import("./terminal").then((m) => setView(() => m.TerminalView), setError);
  }, []);
  if (error) return <ErrorBox error={error} />;
  return View ? <View s={s} /> : <p class="muted">Loading the terminal…</p>;
}

function Overview({ s }: { s: Sandbox }) {
  const usage = useLoad(() => call<Usage>("GET", `${sandboxPath(s.id)}/usage`), [s.id, s.state]);
  const net = s.network;
  const timers = [
    s.auto_stop_minutes ? `auto-stop after ${s.auto_stop_minutes} idle min` : "no auto-stop",
    s.auto_archive_days ? `auto-archive after ${s.auto_archive_days} days stopped` : "no auto-archive",
    s.auto_delete_days ? `auto-delete after ${s.auto_delete_days} days stopped` : "no auto-delete",
  ].join(" · ");
  const user = Object.entries(s.metadata).filter(([k]) => k !== "last_start");
  return (
    <div class="overview">
      <div>
        <h2>Details</h2>
        <Details rows={[
          ["Template", `${s.template}${s.template_version ? ` v${s.template_version}` : ""}`],
          ["Template version", s.template_version_id ? <span class="mono">{s.template_version_id}</span> : ""],
          ["Runtime", s.runtime ?? ""],
          ["Size", `${s.cpu} vCPU · ${s.ram_mb} MB RAM · ${s.disk_gb} GB disk`],
          ["Type", `${s.type} (${timers})`],
          ["Expires", s.expires_at ? when(s.expires_at) : "no TTL"],
          ["Auto-resume", s.auto_resume ? "on (a preview request starts it)" : "off"],
          ["Last start", s.restore ? (s.restore === "memory" ? "memory restored" : "cold boot from disk") : ""],
          ["Parent", s.parent_id ? <a href={`/sandbox/${encodeURIComponent(s.parent_id)}`} data-nav class="mono">{s.parent_id}</a> : ""],
          ["Children", <a href={`/?parent=${encodeURIComponent(s.id)}`} data-nav>List its children</a>],
          ["Project", s.project_id ? <span class="mono">{s.project_id}</span> : ""],
          ["From snapshot", s.source_snapshot_id ? <span class="mono">{s.source_snapshot_id}</span> : ""],
          ["Environment", s.env_keys.join(", ")],
          ["Metadata", user.map(([k, v]) => `${k}=${v}`).join(", ")],
          ["Network", net ? `egress ${net.egress ?? "allow"}${net.allow_out?.length ? `; allow ${net.allow_out.join(", ")}` : ""}${net.deny_out?.length ? `; deny ${net.deny_out.join(", ")}` : ""}` : "egress allow"],
          ["SSH keys", s.ssh_key_fingerprints?.length ? <ul class="plain mono">{s.ssh_key_fingerprints.map((f) => <li key={f}>{f}</li>)}</ul> : ""],
          ["Created", when(s.created_at)],
        ]} />
        <h2>Billed usage</h2>
        {usage.error ? <ErrorBox error={usage.error} /> : usage.data ? (
          <Details class="details" rows={[
            ["Compute", `${usage.data.cpu_seconds.toFixed(0)} vCPU·s · ${usage.data.ram_gb_seconds.toFixed(0)} GB·s RAM`],
            ["Storage", `${usage.data.storage_gb_hours.toFixed(2)} GB·h while stopped`],
            ["Window", `${when(usage.data.from)} – ${when(usage.data.to)}`],
          ]} />
        ) : <p class="muted">Loading…</p>}
      </div>
      <div>
        <h2>Metrics</h2>
        <MetricsCharts s={s} />
      </div>
    </div>
  );
}

function SnapshotsView({ s, changes, onDone }: { s: Sandbox; changes: number; onDone: (n: Notice) => void }) {
  const list = useLoad(() => call<{ rows: Snapshot[] }>("GET", `${sandboxPath(s.id)}/snapshots`), [s.id, changes]);
  const [open, setOpen] = useState<{ op: "restore" | "clone" | "delete"; snap: Snapshot } | null>(null);
  const close = () => setOpen(null);
  const label = (x: Snapshot) => x.name ?? x.id;
  return (
    <div>
      <div class="row">
        <h2 class="grow">Snapshots</h2>
        <SandboxActions s={s} which={["snapshot"]} onDone={onDone} />
      </div>
      <ErrorBox error={list.error} />
      {list.data && list.data.rows.length === 0 && <p class="muted">No snapshots yet.</p>}
      {list.data && list.data.rows.length > 0 && (
        <table class="snapshots">
          <thead><tr><th scope="col">Snapshot</th><th scope="col">State</th><th scope="col">Memory</th><th scope="col">Size</th><th scope="col">Taken</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
          <tbody>
            {list.data.rows.map((x) => (
              <tr key={x.id} data-id={x.id}>
                <td data-label="Snapshot"><div>{x.name && <div>{x.name}</div>}<div class="mono muted">{x.id}</div></div></td>
                <td data-label="State">{x.state}{x.reason ? ` (${x.reason})` : ""}</td>
                <td data-label="Memory">{x.memory ? "yes" : "disk only"}</td>
                <td data-label="Size">{bytes(x.size_bytes)}</td>
                <td data-label="Taken">{when(x.created_at)}</td>
                <td data-label="">
                  <div class="actions">
                    <button type="button" class="secondary small" aria-label={`Restore ${label(x)}`} disabled={x.state !== "ready"} onClick={() => setOpen({ op: "restore", snap: x })}>Restore</button>
                    <button type="button" class="secondary small" aria-label={`New sandbox from ${label(x)}`} disabled={x.state !== "ready"} onClick={() => setOpen({ op: "clone", snap: x })}>New sandbox</button>
                    <button type="button" class="danger small" aria-label={`Delete ${label(x)}`} onClick={() => setOpen({ op: "delete", snap: x })}>Delete</button>
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {open?.op === "restore" && (
        <ActionDialog title={`Restore ${s.name ?? s.id} to ${label(open.snap)}?`} confirmLabel="Restore" busyLabel="Restoring…" danger onClose={close}
          onConfirm={async () => {
            put(await call<Sandbox>("POST", `${sandboxPath(s.id)}/restore`, { snapshot_id: open.snap.id }));
            onDone({ text: `Restoring to ${label(open.snap)}.` });
          }}>
          <p>Its disk is replaced by the snapshot's{open.snap.memory ? " and it resumes from the snapshot's memory" : " and it boots on it"}; changes since are lost.</p>
        </ActionDialog>
      )}
      {open?.op === "clone" && (
        <ActionDialog title={`New sandbox from ${label(open.snap)}?`} confirmLabel="Create" busyLabel="Creating…" onClose={close}
          onConfirm={async (f) => {
            const name = (f.elements.namedItem("clone-name") as HTMLInputElement).value.trim();
            const c = put(await call<Sandbox>("POST", "/v1/sandboxes", { from_snapshot: open.snap.id, ...(name ? { name } : {}) }), 0);
            onDone({ text: "Created", links: [{ href: `/sandbox/${encodeURIComponent(c.id)}`, label: c.name ?? c.id }] });
          }}>
          <p>A copy with its own identity; template, runtime and size come from the snapshot.</p>
          <Field id="clone-name" label="Name" hint="optional"><input id="clone-name" name="clone-name" autoComplete="off" /></Field>
        </ActionDialog>
      )}
      {open?.op === "delete" && (
        <ActionDialog title={`Delete snapshot ${label(open.snap)}?`} confirmLabel="Delete" busyLabel="Deleting…" danger onClose={close}
          onConfirm={async () => {
            await call("DELETE", `/v1/snapshots/${encodeURIComponent(open.snap.id)}`);
            await list.reload();
          }}>
          <p>Its files are removed; sandboxes made from it keep running.</p>
        </ActionDialog>
      )}
    </div>
  );
}

function PreviewsView({ s }: { s: Sandbox }) {
  const [port, setPort] = useState("8080");
  const [urls, setUrls] = useState<PreviewURL[]>([]);
  const [error, setError] = useState<unknown>(null);
  const [revoke, setRevoke] = useState<PreviewURL | null>(null);
  const upsert = (u: PreviewURL) => setUrls((l) => [u, ...l.filter((x) => x.port !== u.port)]);
  const path = (p: number) => `${sandboxPath(s.id)}/preview-urls/${p}`;
  return (
    <div>
      <h2>Preview URLs</h2>
      <p class="muted">Each port of the sandbox is served by the preview proxy; a request to a stopped sandbox starts it{s.auto_resume ? "" : " (auto-resume is off for this one)"}.</p>
      <form class="row" onSubmit={async (e) => {
        e.preventDefault();
        setError(null);
        try {
          upsert(await call<PreviewURL>("GET", path(Number(port))));
        } catch (err) {
          setError(err);
        }
      }}>
        <label for="pv-port">Port</label>
        <input id="pv-port" name="port" type="number" min="1" max="65535" required value={port} onInput={(e) => setPort(e.currentTarget.value)} />
        <button type="submit">Get URLs</button>
      </form>
      <ErrorBox error={error} />
      {urls.map((u) => (
        <div class="card inner" key={u.port} data-port={u.port}>
          <h3>Port {u.port} {u.public ? <span class="pill">public</span> : <span class="pill">token needed</span>}</h3>
          <Details rows={[
            ["Open", <a href={u.browser_url} target="_blank" rel="noopener noreferrer">{u.url}</a>],
            ["Host URL", <span class="mono">{u.url}</span>],
            ["Path URL", <span class="mono">{u.path_url}</span>],
            ["Token", <span class="row tight"><code class="token">{u.token}</code><Copy text={u.token} label={`Copy the token of port ${u.port}`} /></span>],
            ["Expires", u.expires_at ? when(u.expires_at) : "when revoked"],
          ]} />
          <div class="actions">
            <button type="button" class="secondary" onClick={async () => {
              setError(null);
              try {
                upsert(await call<PreviewURL>("POST", path(u.port), { public: !u.public }));
              } catch (err) {
                setError(err);
              }
            }}>{u.public ? `Make port ${u.port} private` : `Make port ${u.port} public`}</button>
            <button type="button" class="danger" onClick={() => setRevoke(u)}>Revoke tokens of port {u.port}</button>
          </div>
        </div>
      ))}
      {revoke && (
        <ActionDialog title={`Revoke every token of port ${revoke.port}?`} confirmLabel="Revoke" busyLabel="Revoking…" danger
          onClose={() => setRevoke(null)}
          onConfirm={async () => {
            await call("DELETE", path(revoke.port));
            setUrls((l) => l.filter((x) => x.port !== revoke.port));
          }}>
          <p>Links handed out so far stop working at once, and the port becomes private.</p>
        </ActionDialog>
      )}
    </div>
  );
}

function EventsView({ s }: { s: Sandbox }) {
  const [events, setEvents] = useState<Event[]>([]);
  const [error, setError] = useState<ApiError | null>(null);
  useEffect(() => {
    setEvents([]);
    return followEvents(`sandbox_id=${encodeURIComponent(s.id)}`,
      (ev) => setEvents((l) => [ev, ...l].slice(0, 500)),
      (_ok, err) => setError(err ?? null));
  }, [s.id]);
  const summary = (ev: Event) => {
    const d = ev.data;
    if (ev.type === "state_changed") return `${d.from} → ${d.to}${d.reason ? ` (${d.reason})` : ""}`;
    return Object.entries(d).filter(([, v]) => v !== "" && v !== null).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join(" · ");
  };
  return (
    <div>
      <h2>Events <span class="muted small">({plural(events.length, "event")}, newest first, live)</span></h2>
      {error && error.code !== "network_error" && <ErrorBox error={error} />}
      <ol class="events" reversed>
        {events.map((ev) => (
          <li key={ev.id} data-type={ev.type}>
            <time dateTime={ev.created_at}>{when(ev.created_at)}</time>
            <strong>{ev.type}</strong>
            <span>{summary(ev)}</span>
          </li>
        ))}
      </ol>
    </div>
  );
}
