// The sandbox page's terminal: xterm.js over GET /v1/sandboxes/{id}/pty
// (docs/terminal.md). Keys go to the sandbox as binary frames; the
// terminal's size follows its box (fit addon) and each change is sent as a
// resize message, so the shell's `stty size` matches what is on screen.
import "./xterm-style";
import "@xterm/xterm/css/xterm.css";
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { useEffect, useRef, useState } from "preact/hooks";
import { ptySocket, type Sandbox } from "./api";

type Conn = "connecting" | "connected" | "closed";

/** Focusable elements in document order, to leave the terminal by keyboard. */
function focusables(): HTMLElement[] {
  return [...document.querySelectorAll<HTMLElement>(
    "a[href], button:not([disabled]), input:not([disabled]), select:not([disabled]), textarea:not([disabled]), [tabindex]:not([tabindex='-1'])",
  )].filter((el) => el.offsetParent !== null || el === document.activeElement);
}

/**
 * A session opens when the sandbox runs. It stays open while the sandbox
 * stops, until ptd ends it (closing it from here in the middle of a stop
 * would hang the shell up during the sandbox's checkpoint); once the
 * sandbox runs again a new one opens by itself, unless the shell exited,
 * which leaves a New session button.
 */
export function TerminalView({ s }: { s: Sandbox }) {
  const box = useRef<HTMLDivElement>(null);
  const [conn, setConn] = useState<Conn>("closed");
  const [note, setNote] = useState("");
  const [session, setSession] = useState(0); // bumping it opens a new session; 0: none yet
  const userEnded = useRef(false);
  const running = s.state === "running";

  // Whether the sandbox left `running` since the session closed: only
  // then does a new session open by itself (a refusal or a dropped
  // connection while it runs leaves the New session button instead).
  const stopped = useRef(false);
  useEffect(() => {
    if (!running) stopped.current = true;
  }, [running]);
  useEffect(() => {
    if (!running || conn !== "closed") return;
    if (session === 0 || (stopped.current && !userEnded.current)) setSession((n) => n + 1);
    stopped.current = false;
  }, [running, conn]);

  useEffect(() => {
    if (session === 0 || !box.current) return;
    const host = box.current;
    userEnded.current = false;
    const term = new Terminal({
      cursorBlink: true,
      fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace',
      fontSize: 14,
      lineHeight: 1.15, // room for underscores below the baseline
      scrollback: 5000,
      theme: { background: "#0b1020", foreground: "#e5e7eb" },
    });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host);
    const textarea = host.querySelector("textarea");
    textarea?.setAttribute("aria-label", "Terminal input");
    // Tab belongs to the shell (completion); Escape then Tab (or Shift+Tab)
    // leaves the terminal, so the keyboard is never trapped.
    let escAt = 0;
    term.attachCustomKeyEventHandler((ev) => {
      if (ev.type !== "keydown") return true;
      if (ev.key === "Escape") {
        escAt = ev.timeStamp;
        return true;
      }
      if (ev.key === "Tab" && ev.timeStamp - escAt < 1500) {
        ev.preventDefault();
        const all = focusables();
        const i = all.indexOf(textarea as HTMLElement);
        const next = all[ev.shiftKey ? i - 1 : i + 1];
        if (i >= 0 && next) next.focus();
        else (textarea as HTMLElement | null)?.blur();
        return false;
      }
      return true;
    });
    const fitNow = () => {
      try {
        fit.fit();
      } catch {
        // not laid out yet
      }
      host.dataset.cols = String(term.cols);
      host.dataset.rows = String(term.rows);
    };
    fitNow();

    setConn("connecting");
    setNote("");
    const ws = ptySocket(s.id);
    ws.binaryType = "arraybuffer";
    const enc = new TextEncoder();
    const send = (data: string | Uint8Array) => {
      if (ws.readyState === WebSocket.OPEN) ws.send(data);
    };
    ws.onopen = () => {
      setConn("connected");
      // The login shell is the default command; a resize (not a start) as
      // the first message gives it this size. ptd waits only a second for
      // a start message, and a start that arrives after it (a busy
      // browser) would be refused, while a resize is applied whenever it
      // comes.
      send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
      term.focus();
    };
    ws.onmessage = (e) => {
      if (e.data instanceof ArrayBuffer) term.write(new Uint8Array(e.data));
    };
    ws.onclose = (e) => {
      if (e.code === 1000) {
        userEnded.current = true;
        setNote(`The shell ended (${e.reason || "closed"}).`);
      } else {
        const why = e.code >= 4000 ? `${e.reason} (${e.code - 4000})` : "the connection closed";
        setNote(`The session ended: ${why}. A new one opens when the sandbox runs.`);
      }
      setConn("closed");
    };
    const onData = term.onData((d) => send(enc.encode(d)));
    const onBinary = term.onBinary((d) => send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
    const onResize = term.onResize(({ cols, rows }) => {
      host.dataset.cols = String(cols);
      host.dataset.rows = String(rows);
      send(JSON.stringify({ type: "resize", cols, rows }));
    });
    const ro = new ResizeObserver(() => fitNow());
    ro.observe(host);
    return () => {
      ro.disconnect();
      onData.dispose();
      onBinary.dispose();
      onResize.dispose();
      ws.onclose = null;
      ws.close();
      term.dispose();
    };
  }, [s.id, session]);

  if (session === 0) {
    return <p class="muted" role="status">The terminal opens while the sandbox runs (it is {s.state}).</p>;
  }
  return (
    <div class="terminal-wrap">
      <div class="row">
        <span class={`conn conn-${conn}`} role="status" data-conn={conn}>
          {conn === "connected" ? "Connected" : conn === "connecting" ? "Connecting…" : "Closed"}
        </span>
        {note && <span class="muted">{note}</span>}
        {conn === "closed" && running && (
          <button type="button" onClick={() => setSession((n) => n + 1)}>New session</button>
        )}
      </div>
      <div ref={box} class="terminal" data-testid="terminal" />
      <p class="muted small">Tab completes in the shell; press Escape, then Tab, to leave the terminal.</p>
    </div>
  );
}
