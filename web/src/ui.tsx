// Small shared components. Widgets are native elements (<dialog>, <button>,
// <select>, <details>) so keyboard use and focus handling come from the
// browser; Preact only composes them.
import { cloneElement, isValidElement, type ComponentChildren, type TargetedEvent } from "preact";
import { useEffect, useRef, useState, useCallback } from "preact/hooks";
import { describe, type SandboxState } from "./api";

export function ErrorBox({ error, id }: { error: unknown; id?: string }) {
  if (error === null || error === undefined || error === "") return null;
  return <p id={id} class="error" role="alert">{typeof error === "string" ? error : describe(error)}</p>;
}

export function StateBadge({ state }: { state: SandboxState }) {
  return <span class={`state state-${state}`} data-state={state}>{state}</span>;
}

/** A labelled control; its hint is tied to it with aria-describedby. */
export function Field({ id, label, hint, children, wide }: {
  id: string; label: string; hint?: string; children: ComponentChildren; wide?: boolean;
}) {
  const control = hint && isValidElement(children)
    ? cloneElement(children, { "aria-describedby": `${id}-hint` })
    : children;
  return (
    <div class={wide ? "field wide" : "field"}>
      <label for={id}>{label}</label>
      {control}
      {hint && <small id={`${id}-hint`} class="muted">{hint}</small>}
    </div>
  );
}

/** A Field whose control is a textarea of one entry a line (a list or
 * map the form parses on submit), as the create form's env, metadata,
 * network lists and SSH keys are. */
export function LinesField({ id, name, label, hint, rows, wide }: {
  id: string; name: string; label: string; hint: string; rows: number; wide?: boolean;
}) {
  return (
    <Field id={id} label={label} hint={hint} wide={wide}>
      <textarea id={id} name={name} rows={rows} />
    </Field>
  );
}

/** Definition list rows: [term, value] pairs, empty values shown as a dash. */
export function Details({ rows, class: cls = "details" }: {
  rows: [string, ComponentChildren][]; class?: string;
}) {
  return (
    <dl class={cls}>
      {rows.map(([k, v]) => [<dt key={`t-${k}`}>{k}</dt>,
        <dd key={`d-${k}`} data-term={k}>{v === "" || v === null || v === undefined ? "—" : v}</dd>])}
    </dl>
  );
}

/**
 * A modal confirmation: the question, optional form fields, Cancel and a
 * confirm button that shows `busyLabel` while onConfirm runs. A refused
 * call keeps the dialog open with the API's message and code; success
 * closes it. Escape or Cancel closes it without doing anything.
 */
export function ActionDialog({ title, confirmLabel, busyLabel, danger, onConfirm, onClose, children }: {
  title: string;
  confirmLabel: string;
  busyLabel: string;
  danger?: boolean;
  onConfirm: (form: HTMLFormElement) => Promise<void>;
  onClose: () => void;
  children?: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const opener = document.activeElement as HTMLElement | null;
    ref.current?.showModal();
    return () => {
      if (opener?.isConnected) opener.focus();
    };
  }, []);
  const submit = async (e: TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onConfirm(e.currentTarget);
      ref.current?.close();
      onClose();
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };
  return (
    <dialog ref={ref} class="confirm" aria-labelledby="dialog-title"
      onCancel={(e) => { e.preventDefault(); if (!busy) { ref.current?.close(); onClose(); } }}>
      <form onSubmit={submit}>
        <h2 id="dialog-title">{title}</h2>
        {children}
        <ErrorBox error={error} />
        <div class="row end">
          <button type="button" class="secondary" disabled={busy}
            onClick={() => { ref.current?.close(); onClose(); }}>Cancel</button>
          <button type="submit" class={danger ? "danger" : ""} disabled={busy} aria-busy={busy}>
            {busy ? busyLabel : confirmLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** Loads something once per deps change; reload() loads it again. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): {
  data: T | undefined; error: unknown; loading: boolean; reload: () => Promise<void>;
} {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const gen = useRef(0);
  const reload = useCallback(async () => {
    const g = ++gen.current;
    setLoading(true);
    try {
      const d = await fn();
      if (g === gen.current) {
        setData(d);
        setError(null);
      }
    } catch (e) {
      if (g === gen.current) setError(e);
    } finally {
      if (g === gen.current) setLoading(false);
    }
  }, deps);
  useEffect(() => {
    void reload();
  }, [reload]);
  return { data, error, loading, reload };
}

/** Calls fn every `ms` while active (and once at once). */
export function useInterval(fn: () => void, ms: number, active: boolean): void {
  const saved = useRef(fn);
  saved.current = fn;
  useEffect(() => {
    if (!active) return;
    saved.current();
    const t = setInterval(() => saved.current(), ms);
    return () => clearInterval(t);
  }, [ms, active]);
}

export function Copy({ text, label }: { text: string; label: string }) {
  const [done, setDone] = useState(false);
  return (
    <button type="button" class="small secondary" aria-label={label} onClick={async () => {
      try {
        await navigator.clipboard.writeText(text);
        setDone(true);
        setTimeout(() => setDone(false), 1500);
      } catch {
        // clipboard refused (insecure origin): the text is on the page
      }
    }}>{done ? "Copied" : "Copy"}</button>
  );
}
