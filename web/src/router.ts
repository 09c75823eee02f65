// Client-side routes. ptd answers index.html at each of them
// (internal/dashboard), so a reload or a shared link lands on the view.
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { view: "list" }
  | { view: "new" }
  | { view: "sandbox"; id: string; tab: string }
  | { view: "templates" }
  | { view: "template"; slug: string }
  | { view: "usage" };

export function parse(path: string): Route {
  let m: RegExpMatchArray | null;
  if (path === "/new") return { view: "new" };
  if (path === "/usage") return { view: "usage" };
  if (path === "/template") return { view: "templates" };
  if ((m = path.match(/^\/template\/([^/]+)$/))) return { view: "template", slug: decodeURIComponent(m[1]) };
  if ((m = path.match(/^\/sandbox\/([^/]+)(?:\/([a-z]+))?$/))) {
    return { view: "sandbox", id: decodeURIComponent(m[1]), tab: m[2] ?? "overview" };
  }
  return { view: "list" };
}

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  for (const l of listeners) l();
}

window.addEventListener("popstate", () => {
  for (const l of listeners) l();
});

// Links marked data-nav change the view without a page load (modified
// clicks still open a new tab).
document.addEventListener("click", (e) => {
  const a = (e.target as Element).closest?.("a[data-nav]");
  if (a instanceof HTMLAnchorElement && e.button === 0 && !e.ctrlKey && !e.metaKey && !e.shiftKey && !e.altKey) {
    e.preventDefault();
    navigate(a.pathname + a.search);
  }
});

/** The current location, re-rendering on every navigation. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, set] = useState(0);
  useEffect(() => {
    const l = () => set((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}
