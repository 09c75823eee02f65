// The sandbox page's file browser: list a directory, enter it, upload into
// it, download or delete a file, make a directory (/v1/sandboxes/{id}/files).
import { useEffect, useRef, useState } from "preact/hooks";
import { call, filesPath, raw, sandboxPath, type FileEntry, type Sandbox } from "./api";
import { bytes, when } from "./format";
import { ActionDialog, ErrorBox } from "./ui";

const join = (dir: string, name: string) => (dir.endsWith("/") ? dir : `${dir}/`) + name;
const parent = (p: string) => p.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";

export function FilesView({ s }: { s: Sandbox }) {
  const [path, setPath] = useState("/");
  const [typed, setTyped] = useState("/");
  const [entries, setEntries] = useState<FileEntry[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState("");
  const [del, setDel] = useState<FileEntry | null>(null);
  const upload = useRef<HTMLInputElement>(null);
  const running = s.state === "running";

  const gen = useRef(0);
  // follow: show p in the path field (not on the first load, which must
  // not overwrite what someone typed meanwhile).
  const load = async (p: string, follow = true) => {
    const g = ++gen.current; // only the latest listing asked for is shown
    setError(null);
    try {
      const r = await call<{ entries: FileEntry[] }>("GET", filesPath(s.id, p));
      if (g !== gen.current) return;
      setEntries([...r.entries].sort((a, b) =>
        a.type === b.type ? a.name.localeCompare(b.name) : a.type === "dir" ? -1 : b.type === "dir" ? 1 : a.name.localeCompare(b.name)));
      setPath(p);
      if (follow) setTyped(p);
    } catch (e) {
      if (g === gen.current) setError(e);
    }
  };
  useEffect(() => {
    if (running) void load(path, false);
  }, [s.id, running]);

  if (!running) return <p class="muted">Files can be read while the sandbox runs (it is {s.state}).</p>;

  const download = async (f: FileEntry) => {
    setError(null);
    try {
      const blob = await (await raw("GET", filesPath(s.id, f.path))).blob();
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = f.name;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      setError(e);
    }
  };

  return (
    <div>
      <form class="row" onSubmit={(e) => { e.preventDefault(); void load(typed.trim() || "/"); }}>
        <label for="f-path">Path</label>
        <input id="f-path" name="path" value={typed} onInput={(e) => setTyped(e.currentTarget.value)} autoComplete="off" />
        <button type="submit">Open</button>
      </form>
      <form class="row" onSubmit={async (e) => {
        e.preventDefault();
        const files = [...(upload.current?.files ?? [])];
        if (!files.length) return;
        setError(null);
        try {
          for (const [i, f] of files.entries()) {
            setBusy(`Uploading ${f.name} (${i + 1} of ${files.length})…`);
            await raw("PUT", filesPath(s.id, join(path, f.name)), f, "application/octet-stream");
          }
          if (upload.current) upload.current.value = "";
          await load(path);
        } catch (err) {
          setError(err);
        } finally {
          setBusy("");
        }
      }}>
        <label for="f-upload">Upload to {path}</label>
        <input id="f-upload" type="file" name="upload" multiple ref={upload} />
        <button type="submit" disabled={busy !== ""}>Upload</button>
        <span role="status" class="muted">{busy}</span>
      </form>
      <form class="row" onSubmit={async (e) => {
        e.preventDefault();
        const input = e.currentTarget.elements.namedItem("mkdir") as HTMLInputElement;
        const name = input.value.trim();
        if (!name) return;
        setError(null);
        try {
          await call("POST", `${sandboxPath(s.id)}/files/mkdir`, { path: name.startsWith("/") ? name : join(path, name) });
          input.value = "";
          await load(path);
        } catch (err) {
          setError(err);
        }
      }}>
        <label for="f-mkdir">New folder</label>
        <input id="f-mkdir" name="mkdir" autoComplete="off" placeholder="name" />
        <button type="submit" class="secondary">Create</button>
      </form>
      <ErrorBox error={error} />
      <table class="files">
        <caption class="sr-only">Entries of {path}</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Size</th><th scope="col">Mode</th><th scope="col">Modified</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>
          {path !== "/" && (
            <tr><td colSpan={5}><button type="button" class="link" onClick={() => void load(parent(path))}>.. (up)</button></td></tr>
          )}
          {entries?.map((f) => (
            <tr key={f.path} data-name={f.name}>
              <td data-label="Name"><span>
                {f.type === "dir"
                  ? <button type="button" class="link" onClick={() => void load(f.path)}>{f.name}/</button>
                  : <button type="button" class="link" aria-label={`Download ${f.name}`} onClick={() => void download(f)}>{f.name}</button>}
                {f.type === "symlink" && <span class="muted"> (link)</span>}
              </span></td>
              <td data-label="Size">{f.type === "dir" ? "" : bytes(f.size)}</td>
              <td data-label="Mode" class="mono">{f.mode}</td>
              <td data-label="Modified">{when(f.modified_at)}</td>
              <td data-label="">
                <button type="button" class="danger small" aria-label={`Delete ${f.name}`} onClick={() => setDel(f)}>Delete</button>
              </td>
            </tr>
          ))}
          {entries?.length === 0 && <tr><td colSpan={5} class="muted">Empty directory.</td></tr>}
        </tbody>
      </table>
      {del && (
        <ActionDialog title={`Delete ${del.path}?`} confirmLabel="Delete" busyLabel="Deleting…" danger
          onClose={() => setDel(null)}
          onConfirm={async () => {
            await raw("DELETE", filesPath(s.id, del.path));
            await load(path);
          }}>
          <p>{del.type === "dir" ? "The directory and everything in it are removed." : "The file is removed."}</p>
        </ActionDialog>
      )}
    </div>
  );
}
