// A small DOM builder: every text goes through textContent, so API data
// can never become markup.

type Child = Node | string | null | undefined | false;
type Attrs = Record<string, string | boolean | number | EventListener | undefined>;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: (Child | Child[])[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "className") {
      el.className = String(v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "string" ? document.createTextNode(c) : c);
  }
  return el;
}

/** Formats a byte count for people (1.5 MiB). */
export function bytes(n: number | undefined): string {
  if (n === undefined) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

/** Asks a yes/no question in a modal <dialog>; resolves true on confirm. */
export function confirmDialog(question: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const dlg = h("dialog", { className: "confirm", "aria-labelledby": "confirm-q" });
    const done = (ok: boolean) => {
      dlg.close();
      dlg.remove();
      resolve(ok);
    };
    dlg.append(
      h("p", { id: "confirm-q" }, question),
      h("div", { className: "row" },
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
        h("button", { type: "button", className: "danger", onclick: () => done(true) }, confirmLabel)),
    );
    dlg.addEventListener("cancel", () => done(false));
    document.body.append(dlg);
    dlg.showModal();
  });
}

/** Parses KEY=VALUE lines (blank lines skipped) into an object. */
export function parsePairs(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const l = line.trim();
    if (!l) continue;
    const i = l.indexOf("=");
    if (i <= 0) throw new Error(`${what}: "${l}" is not KEY=VALUE`);
    out[l.slice(0, i)] = l.slice(i + 1);
  }
  return out;
}
