// A sandbox's lifecycle actions: stop, start, archive, snapshot, fork,
// resize and delete, each behind a confirmation dialog that shows the
// call's progress and the API's refusal. What happens after the call
// (stopping → stopped) arrives through the event stream.
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import {
  call, sandboxPath, transitional, type ForkResult, type ResizeResult, type Sandbox, type Snapshot,
} from "./api";
import { mark, put, refresh } from "./store";
import { ActionDialog, Field } from "./ui";
import { plural } from "./format";

/** What a finished action tells the page (shown in its status line). */
export type Notice = { text: string; links?: { href: string; label: string }[] };

export type ActionName = "stop" | "start" | "archive" | "snapshot" | "fork" | "resize" | "delete";

const label = (s: Sandbox) => s.name ?? s.id;

/** Which actions the sandbox's state allows. */
export function allowed(s: Sandbox): Set<ActionName> {
  const a = new Set<ActionName>();
  switch (s.state) {
    case "running": a.add("stop").add("snapshot").add("fork").add("resize"); break;
    case "stopped": a.add("start").add("archive").add("snapshot").add("resize"); break;
    case "archived": a.add("start").add("resize"); break;
    case "failed": a.add("start"); break;
  }
  // Any live sandbox can be deleted (the API refuses a parent with live children).
  if (s.state !== "deleting" && s.state !== "deleted") a.add("delete");
  return a;
}

async function lifecycle(s: Sandbox, verb: string): Promise<void> {
  const seen = mark(s.id);
  put(await call<Sandbox>("POST", `${sandboxPath(s.id)}/${verb}`), seen);
}

/**
 * The buttons for `which` actions (those the state allows), each opening
 * its dialog. onDone receives what a finished snapshot, fork or resize
 * reports; stop, start, archive and delete show as the state changes.
 */
export function SandboxActions({ s, which, onDone }: {
  s: Sandbox; which: ActionName[]; onDone?: (n: Notice) => void;
}) {
  const [open, setOpen] = useState<ActionName | null>(null);
  const ok = allowed(s);
  const done = (n: Notice) => onDone?.(n);
  const close = () => setOpen(null);
  const titles: Record<ActionName, string> = {
    stop: "Stop", start: "Start", archive: "Archive", snapshot: "Snapshot", fork: "Fork", resize: "Resize", delete: "Delete",
  };
  return (
    <div class="actions">
      {which.filter((a) => ok.has(a)).map((a) => (
        <button key={a} type="button" class={a === "delete" ? "danger" : a === "stop" || a === "start" ? "" : "secondary"}
          aria-label={`${titles[a]} ${label(s)}`} onClick={() => setOpen(a)}>{titles[a]}</button>
      ))}
      {open === "stop" && (
        <ActionDialog title={`Stop ${label(s)}?`} confirmLabel="Stop" busyLabel="Stopping…" onClose={close}
          onConfirm={() => lifecycle(s, "stop")}>
          <p>Its processes stop (their memory is kept where its runtime can); its files stay.</p>
        </ActionDialog>
      )}
      {open === "start" && (
        <ActionDialog title={`Start ${label(s)}?`} confirmLabel="Start" busyLabel="Starting…" onClose={close}
          onConfirm={() => lifecycle(s, "start")}>
          <p>{s.state === "archived" ? "Its disk is restored from the archive first." : "It boots, resuming its memory when the stop kept it."}</p>
        </ActionDialog>
      )}
      {open === "archive" && (
        <ActionDialog title={`Archive ${label(s)}?`} confirmLabel="Archive" busyLabel="Archiving…" onClose={close}
          onConfirm={() => lifecycle(s, "archive")}>
          <p>Its disk moves to cold storage and it bills nothing; Start restores it.</p>
        </ActionDialog>
      )}
      {open === "snapshot" && <SnapshotDialog s={s} onClose={close} onDone={done} />}
      {open === "fork" && <ForkDialog s={s} onClose={close} onDone={done} />}
      {open === "resize" && <ResizeDialog s={s} onClose={close} onDone={done} />}
      {open === "delete" && (
        <ActionDialog title={`Delete ${label(s)}?`} confirmLabel="Delete" busyLabel="Deleting…" danger onClose={close}
          onConfirm={async () => {
            const seen = mark(s.id);
            put(await call<Sandbox>("DELETE", sandboxPath(s.id)), seen);
          }}>
          <p>Its disk and snapshots go too. This cannot be undone.</p>
        </ActionDialog>
      )}
    </div>
  );
}

function SnapshotDialog({ s, onClose, onDone }: { s: Sandbox; onClose: () => void; onDone: (n: Notice) => void }) {
  return (
    <ActionDialog title={`Snapshot ${label(s)}?`} confirmLabel="Take snapshot" busyLabel="Taking snapshot…" onClose={onClose}
      onConfirm={async (f) => {
        const name = (f.elements.namedItem("snap-name") as HTMLInputElement).value.trim();
        const memory = (f.elements.namedItem("snap-memory") as HTMLSelectElement).value;
        const body: Record<string, unknown> = {};
        if (name) body.name = name;
        if (memory !== "auto") body.memory = memory === "yes";
        const snap = await call<Snapshot>("POST", `${sandboxPath(s.id)}/snapshots`, body);
        onDone({ text: `Snapshot ${snap.name ?? snap.id} is ${snap.state}${snap.memory ? " (with memory)" : " (disk only)"}.` });
      }}>
      <p>The sandbox keeps running; it pauses only while its memory is saved.</p>
      <div class="grid">
        <Field id="snap-name" label="Name" hint="optional">
          <input id="snap-name" name="snap-name" pattern="[a-zA-Z0-9][a-zA-Z0-9._\-]{0,62}" autoComplete="off" />
        </Field>
        <Field id="snap-memory" label="Memory">
          <select id="snap-memory" name="snap-memory">
            <option value="auto">Where the runtime can</option>
            <option value="yes">Required</option>
            <option value="no">Disk only</option>
          </select>
        </Field>
      </div>
    </ActionDialog>
  );
}

function ForkDialog({ s, onClose, onDone }: { s: Sandbox; onClose: () => void; onDone: (n: Notice) => void }) {
  return (
    <ActionDialog title={`Fork ${label(s)}?`} confirmLabel="Fork" busyLabel="Forking…" onClose={onClose}
      onConfirm={async (f) => {
        const count = Number((f.elements.namedItem("fork-count") as HTMLInputElement).value);
        const parent = (f.elements.namedItem("fork-parent") as HTMLInputElement).checked;
        const r = await call<ForkResult>("POST", `${sandboxPath(s.id)}/fork`, { count, parent });
        for (const c of r.sandboxes) put(c, 0);
        onDone({
          text: `Forked ${plural(r.sandboxes.length, "copy", "copies")}${r.memory ? " with memory" : ` from its disk${r.memory_reason ? ` (${r.memory_reason})` : ""}`}:`,
          links: r.sandboxes.map((c) => ({ href: `/sandbox/${encodeURIComponent(c.id)}`, label: c.name ?? c.id })),
        });
      }}>
      <p>Each copy starts from one snapshot of this sandbox, with its own identity.</p>
      <div class="grid">
        <Field id="fork-count" label="Copies">
          <input id="fork-count" name="fork-count" type="number" min="1" max="20" defaultValue="1" required />
        </Field>
        <div class="field check">
          <input id="fork-parent" name="fork-parent" type="checkbox" defaultChecked />
          <label for="fork-parent">Children of this sandbox</label>
        </div>
      </div>
    </ActionDialog>
  );
}

function ResizeDialog({ s, onClose, onDone }: { s: Sandbox; onClose: () => void; onDone: (n: Notice) => void }) {
  const when = (r: ResizeResult) =>
    r.applies_at === "now" ? "now" : r.applies_at === "next_start" ? "at the next start" : "once the host finishes";
  return (
    <ActionDialog title={`Resize ${label(s)}?`} confirmLabel="Resize" busyLabel="Resizing…" onClose={onClose}
      onConfirm={async (f) => {
        const num = (n: string) => Number((f.elements.namedItem(n) as HTMLInputElement).value);
        const cpu = num("rs-cpu"), ram = num("rs-ram"), disk = num("rs-disk");
        // The API takes disk_gb in a request of its own.
        const size: Record<string, number> = {};
        if (cpu !== s.cpu) size.cpu = cpu;
        if (ram !== s.ram_mb) size.ram_mb = ram;
        const said: string[] = [];
        let last: ResizeResult | undefined;
        if (disk !== s.disk_gb) {
          last = await call<ResizeResult>("POST", `${sandboxPath(s.id)}/resize`, { disk_gb: disk });
          said.push(`disk ${last.disk_gb} GB ${when(last)}`);
        }
        if (Object.keys(size).length) {
          last = await call<ResizeResult>("POST", `${sandboxPath(s.id)}/resize`, size);
          said.push(`${last.cpu} vCPU · ${last.ram_mb} MB ${when(last)}${last.partial ? " (the guest freed less memory than asked)" : ""}`);
        }
        if (!last) throw new Error("Nothing to change: the size is the same.");
        await refresh(s.id);
        onDone({ text: `Resized: ${said.join("; ")}.` });
      }}>
      <p>{s.state === "running"
        ? "A running sandbox changes vCPUs and memory live within the headroom it booted with; the disk can only grow."
        : "The next start boots at the new size; the disk can only grow."}</p>
      <div class="grid">
        <Field id="rs-cpu" label="vCPUs"><input id="rs-cpu" name="rs-cpu" type="number" min="0.1" max="64" step="0.1" defaultValue={String(s.cpu)} required /></Field>
        <Field id="rs-ram" label="RAM (MB)"><input id="rs-ram" name="rs-ram" type="number" min="128" step="64" defaultValue={String(s.ram_mb)} required /></Field>
        <Field id="rs-disk" label="Disk (GB)"><input id="rs-disk" name="rs-disk" type="number" min={s.disk_gb} defaultValue={String(s.disk_gb)} required /></Field>
      </div>
    </ActionDialog>
  );
}

/** A progress line for a sandbox on its way somewhere (creating, stopping, archiving…). */
export function Progress({ s }: { s: Sandbox }): ComponentChildren {
  if (!transitional.has(s.state)) return null;
  const p = s.progress;
  const text = `${s.state[0].toUpperCase()}${s.state.slice(1)}…`;
  return (
    <div class="progress" role="status">
      <label for="sb-progress">{text}{p && p.total_bytes > 0 ? ` ${Math.floor((100 * p.done_bytes) / p.total_bytes)} %` : ""}</label>
      {p && p.total_bytes > 0
        ? <progress id="sb-progress" max={p.total_bytes} value={p.done_bytes} />
        : <progress id="sb-progress" />}
    </div>
  );
}
