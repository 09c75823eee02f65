// Platinum's dashboard (docs/dashboard.md): sign in with an API token,
// then the org's sandboxes (live through GET /v1/events), a create form,
// each sandbox's page (metrics, terminal, files, snapshots, previews,
// events and its lifecycle actions), templates and their builds, and the
// org's usage. Preact renders it; keyed diffing keeps focus and scroll
// where they are when the event stream updates a row.
import "./style.css";
import { render, type JSX, type TargetedEvent } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { ApiError, call, describe, getToken, setToken, type Sandbox } from "./api";
import { CreatePage } from "./create";
import { ListPage } from "./list";
import { navigate, parse, useLocation, type Route } from "./router";
import { SandboxPage } from "./sandbox";
import { eventsRunning, live, putAll, startEvents, stopAll, useStore } from "./store";
import { TemplatePage, TemplatesPage } from "./templates";
import { UsagePage } from "./usage";

// Why the last session ended (a refused token), shown on the sign-in form.
let signedOutBecause = "";

function signOut(why = ""): void {
  signedOutBecause = why;
  stopAll();
  setToken(null);
  navigate("/", true);
}

function SignIn() {
  const [error, setError] = useState(signedOutBecause);
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  const submit = async (e: TargetedEvent<HTMLFormElement>) => {
    e.preventDefault();
    setBusy(true);
    setError("");
    setToken(input.current!.value.trim());
    try {
      putAll((await call<{ rows: Sandbox[] }>("GET", "/v1/sandboxes?limit=1")).rows);
      signedOutBecause = "";
      navigate(location.pathname + location.search, true);
    } catch (err) {
      setToken(null);
      setError(describe(err));
      setBusy(false);
      input.current?.focus();
    }
  };
  return (
    <main id="main" class="center">
      <form class="card signin" onSubmit={submit}>
        <h1>Sign in to Platinum</h1>
        <p>Paste an API token (<code>pt token create</code>, or the admin token ptd printed on first start).</p>
        <label for="token">API token</label>
        <input id="token" name="token" type="password" autoComplete="off" required ref={input} />
        <button type="submit" disabled={busy}>{busy ? "Signing in…" : "Sign in"}</button>
        {error && <p id="signin-error" class="error" role="alert">{error}</p>}
      </form>
    </main>
  );
}

const nav: [string, string, Route["view"][]][] = [
  ["/", "Sandboxes", ["list", "sandbox"]],
  ["/new", "New sandbox", ["new"]],
  ["/template", "Templates", ["templates", "template"]],
  ["/usage", "Usage", ["usage"]],
];

function title(r: Route): string {
  switch (r.view) {
    case "sandbox": return `${r.id} · Platinum`;
    case "new": return "New sandbox · Platinum";
    case "templates": return "Templates · Platinum";
    case "template": return `Template ${r.slug} · Platinum`;
    case "usage": return "Usage · Platinum";
    default: return "Sandboxes · Platinum";
  }
}

function App() {
  const { path, query } = useLocation();
  useStore();
  const route = parse(path);
  const signedIn = getToken() !== null;
  if (signedIn && !eventsRunning()) startEvents((e: ApiError) => signOut(e.describe()));
  useEffect(() => {
    document.title = signedIn ? title(route) : "Sign in · Platinum";
  });
  // After a navigation to another view, start keyboard and screen-reader
  // users at its heading, as a page load would (a tab of the same sandbox
  // or a list filter keeps focus where it is).
  const first = useRef(true);
  const viewKey = route.view === "sandbox" ? `sandbox:${route.id}` : route.view === "template" ? `template:${route.slug}` : route.view;
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    document.querySelector<HTMLElement>("main h1")?.focus();
  }, [viewKey]);
  if (!signedIn) return <SignIn />;
  let view: JSX.Element;
  switch (route.view) {
    case "new": view = <CreatePage query={query} />; break;
    case "sandbox": view = <SandboxPage id={route.id} tab={route.tab} />; break;
    case "templates": view = <TemplatesPage />; break;
    case "template": view = <TemplatePage slug={route.slug} />; break;
    case "usage": view = <UsagePage />; break;
    default: view = <ListPage query={query} />;
  }
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <a href="/" data-nav class="brand">Platinum</a>
        <nav aria-label="Main">
          {nav.map(([href, name, views]) => (
            <a key={href} href={href} data-nav aria-current={views.includes(route.view) ? "page" : undefined}>{name}</a>
          ))}
        </nav>
        <span id="live" class={live.connected ? "live on" : "live"} aria-live="polite">{live.connected ? "live" : "connecting…"}</span>
        <button type="button" class="link" onClick={() => signOut()}>Sign out</button>
      </header>
      {view}
    </>
  );
}

render(<App />, document.getElementById("app")!);
