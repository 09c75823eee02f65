// Drives the dashboard in a real headless Chromium (Debian's) against a
// real ptd: PT_URL, PT_TOKEN and PT_ARTIFACTS (where screenshots go) come
// from web_test.go. The tests run in order on one page, as a person would
// use it: each view is also checked at phone width (no sideways scroll)
// and walked with the Tab key (every control reachable).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const url = process.env.PT_URL;
const token = process.env.PT_TOKEN;
const artifacts = process.env.PT_ARTIFACTS;
assert.ok(url && token && artifacts, "PT_URL, PT_TOKEN and PT_ARTIFACTS must be set");

const desktop = { width: 1280, height: 800 };
const phone = { width: 390, height: 844 };
const slow = { timeout: 180_000 };

let ctx;
let page;
const consoleErrors = [];
const failedCalls = [];

before(async () => {
  ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "pt-chromium-")), {
    executablePath: process.env.PT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: desktop,
    acceptDownloads: true,
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  // A CSP violation is reported as an event, not always on the console.
  await page.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"}`));
  });
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
  page.on("response", (r) => {
    if (r.status() >= 400) failedCalls.push(`${r.request().method()} ${new URL(r.url()).pathname} ${r.status()}`);
  });
  page.setDefaultTimeout(60_000);
});

after(async () => {
  await ctx?.close();
});

// ---- helpers ----------------------------------------------------------------

const api = async (method, path, body) => {
  const r = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body && JSON.stringify(body),
  });
  return { status: r.status, body: r.status === 204 ? null : await r.json() };
};

const row = (name) => page.locator("tr", { has: page.locator('td[data-label="Sandbox"]').getByRole("link", { name, exact: true }) });
const stateOf = (name) => row(name).locator("[data-state]");
const badge = () => page.locator(".head-state [data-state]");
const waitState = (loc, state, opts = slow) => loc.and(page.locator(`[data-state="${state}"]`)).waitFor(opts);
const dialog = () => page.getByRole("dialog");

/** Opens a dialog with the button, confirms it, and waits for it to close. */
async function confirmAction(button, confirm, fill) {
  await button.click();
  await dialog().waitFor();
  await fill?.(dialog());
  await dialog().getByRole("button", { name: confirm, exact: true }).click();
  // Done when it closes; a refusal stays in it as an alert.
  const alert = dialog().getByRole("alert");
  for (const end = Date.now() + 120_000; Date.now() < end;) {
    if (!(await dialog().count())) return;
    if (await alert.count()) assert.fail(`the ${confirm} dialog says: ${await alert.innerText()}`);
    await page.waitForTimeout(200);
  }
  assert.fail(`the ${confirm} dialog is still open`);
}

/** Follows a link of the page (same-page navigation, as a person would). */
async function go(linkName, heading) {
  await page.getByRole("link", { name: linkName, exact: true }).first().click();
  if (heading) await page.getByRole("heading", { level: 1, name: heading }).waitFor();
}

const interactive = "a[href], button, input, select, textarea, [tabindex]:not([tabindex='-1'])";

/**
 * Presses Tab from the top of the page until focus comes round again and
 * checks that every visible, enabled control was reached. In the terminal
 * Tab belongs to the shell: Escape then Tab leaves it, as its hint says.
 */
async function tabWalk(view) {
  await page.evaluate(() => {
    document.querySelectorAll("[data-tw]").forEach((e) => e.removeAttribute("data-tw"));
    document.activeElement?.blur?.();
    window.scrollTo(0, 0);
  });
  // Start from the document (or an open modal dialog, which makes the
  // rest inert): the first Tab goes to its first control.
  await page.evaluate(() => {
    const modal = [...document.querySelectorAll("dialog[open]")].find((d) => d.matches(":modal"));
    const from = modal ?? document.body;
    from.tabIndex = -1;
    from.focus();
    from.removeAttribute("tabindex");
  });
  const seen = [];
  for (let i = 0; i < 400; i++) {
    await page.keyboard.press("Tab");
    let id = await page.evaluate((n) => {
      const a = document.activeElement;
      if (!a || a === document.body) return null;
      if (!a.dataset.tw) a.dataset.tw = String(n);
      return a.dataset.tw;
    }, i);
    if (id === null || seen.includes(id)) break;
    seen.push(id);
    const inTerminal = await page.evaluate(() => !!document.activeElement?.closest(".xterm"));
    if (inTerminal) {
      await page.keyboard.press("Escape");
      await page.keyboard.press("Tab");
      id = await page.evaluate(() => document.activeElement?.dataset.tw ?? "");
      assert.ok(!(await page.evaluate(() => !!document.activeElement?.closest(".xterm"))),
        `${view}: Escape then Tab did not leave the terminal`);
      // Walk on from where the terminal let go.
      const here = await page.evaluate((n) => {
        const a = document.activeElement;
        if (!a || a === document.body) return null;
        if (!a.dataset.tw) a.dataset.tw = `t${n}`;
        return a.dataset.tw;
      }, i);
      if (here === null || seen.includes(here)) break;
      seen.push(here);
    }
  }
  const missed = await page.evaluate((sel) => [...([...document.querySelectorAll("dialog[open]")]
    .find((d) => d.matches(":modal")) ?? document).querySelectorAll(sel)]
    .filter((e) => !e.disabled && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== "hidden" &&
      !e.closest("[inert]") && !e.closest("dialog:not([open])") && !e.dataset.tw &&
      // xterm's own helpers: its input textarea is reached (above); its scroll area is not a control.
      !e.closest(".xterm-scrollable-element, .xterm-accessibility"))
    .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ""} "${(e.getAttribute("aria-label") || e.textContent || e.name || "").trim().slice(0, 40)}"`),
  interactive);
  assert.deepEqual(missed, [], `${view}: controls the Tab key never reached`);
  assert.ok(seen.length > 0, `${view}: Tab reached nothing`);
}

/** No sideways scrolling: the page fits the viewport's width. */
async function fits(view) {
  const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  if (over > 0) {
    const wide = await page.evaluate(() => [...document.querySelectorAll("body *")]
      .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 0.5)
      .slice(-5).map((e) => `${e.tagName.toLowerCase()}.${[...e.classList].join(".")} "${(e.textContent ?? "").trim().slice(0, 30)}"`));
    assert.fail(`${view}: the page is ${over}px wider than the ${page.viewportSize().width}px screen; sticking out: ${wide.join(", ")}`);
  }
}

/**
 * Checks a view at 1280x800 and at phone width: a screenshot of each,
 * nothing wider than the screen, and a Tab walk at both sizes.
 */
async function checkView(name, ready) {
  await page.setViewportSize(desktop);
  await ready?.();
  await fits(name);
  await page.screenshot({ path: join(artifacts, `${name}-1280.png`), fullPage: true });
  await tabWalk(`${name} at 1280`);
  await page.setViewportSize(phone);
  await page.waitForTimeout(300); // layout and ResizeObservers settle
  await ready?.();
  await fits(name);
  await page.screenshot({ path: join(artifacts, `${name}-390.png`), fullPage: true });
  await tabWalk(`${name} at 390`);
  await page.setViewportSize(desktop);
  await page.waitForTimeout(300);
}

/** The lines the terminal shows now. */
const screenLines = () => page.locator(".xterm-rows > div").allInnerTexts()
  .then((l) => l.map((s) => s.replace(/\u00a0/g, " ").trimEnd()));

// In-sandbox work (a shell starting, a command's output) gets a minute:
// the machines that run this suite are often loaded.
async function waitLine(pred, what, timeout = 60_000) {
  const end = Date.now() + timeout;
  let last = [];
  while (Date.now() < end) {
    last = await screenLines();
    const hit = last.find(pred);
    if (hit !== undefined) return hit;
    await page.waitForTimeout(200);
  }
  const conn = await page.locator("[data-conn]").getAttribute("data-conn").catch(() => "gone");
  assert.fail(`the terminal (${conn}) never showed ${what}; it shows:\n${last.filter(Boolean).join("\n")}`);
}

async function typeInTerminal(text) {
  await waitLine((l) => /[#$]$/.test(l), "a shell prompt");
  await page.locator(".xterm").click();
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}

// ---- the tests ----------------------------------------------------------------

test("a bad token shows the API's message and code", async () => {
  const r = await fetch(url + "/v1/sandboxes", { headers: { Authorization: "Bearer pt_not_a_real_token" } });
  const want = await r.json();
  await page.goto(url + "/");
  await page.getByLabel("API token").fill("pt_not_a_real_token");
  await page.getByRole("button", { name: "Sign in" }).click();
  const alert = page.getByRole("alert");
  await alert.waitFor();
  assert.equal(await alert.innerText(), `${want.error} (${want.code})`);
  assert.equal(want.code, "unauthorized");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("pt.token")), null);
  assert.ok(!page.url().includes("pt_not_a_real_token"));
  await checkView("01-signin-error");
});

test("sign in by keyboard keeps the token in sessionStorage, not the URL", async () => {
  await page.getByLabel("API token").fill("");
  await page.evaluate(() => document.activeElement?.blur());
  // Real Tab navigation to the field, then type and press Enter.
  for (let i = 0; i < 10 && !(await page.evaluate(() => document.activeElement?.id === "token")); i++) {
    await page.keyboard.press("Tab");
  }
  await page.keyboard.type(token);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { level: 1, name: "Sandboxes" }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("pt.token")), token);
  assert.ok(!page.url().includes(token));
  await page.locator("#live.on").waitFor(); // the event stream is connected
});

const name = `web-${Date.now().toString(36)}`;
// A valid ed25519 public key (api/openapi.yaml's example); the page shows
// only its fingerprint.
const sshKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9HMDu6EbGN40RWdocmteGLCi+kvE08cU9nLF/kCEIC me@laptop";
let id;

test("create a busybox sandbox with the form and see it turn running without reloading", slow, async () => {
  let loads = 0;
  page.on("load", () => loads++);
  await go("New sandbox", "New sandbox");
  await page.getByLabel("Template", { exact: true }).selectOption("busybox");
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("Type").selectOption("dev");
  await page.getByLabel("Auto-stop (idle minutes)").fill("30");
  await page.getByLabel("Environment").fill("GREETING=hello");
  await page.getByLabel("Metadata").fill("suite=web");
  await page.getByLabel("Deny out").fill("203.0.113.0/24");
  await page.getByLabel("SSH public keys").fill(sshKey);
  await checkView("02-create-form");
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
  id = decodeURIComponent(page.url().split("/sandbox/")[1]);
  assert.match(id, /^sbx_/);
  await waitState(badge(), "running");
  assert.equal(loads, 0, "the page reloaded");
  // What the form set is what the API has.
  const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
  assert.equal(sb.type, "dev");
  assert.equal(sb.auto_stop_minutes, 30);
  assert.deepEqual(sb.env_keys, ["GREETING"]);
  assert.deepEqual(sb.network.deny_out, ["203.0.113.0/24"]);
  assert.equal(sb.ssh_key_fingerprints.length, 1);
  const details = page.locator("dl.details");
  await details.getByText(sb.ssh_key_fingerprints[0]).waitFor();
  await details.getByText("deny 203.0.113.0/24", { exact: false }).waitFor();
  // The list shows it running too.
  await go("Sandboxes", "Sandboxes");
  await waitState(stateOf(name), "running");
  assert.equal(loads, 0, "the page reloaded");
});

test("the list: filters as the API has them, live statuses", async () => {
  await row(name).locator('[data-label="Status"]').getByText(/ready|running|idle/).waitFor();
  // Each filter goes into the URL and the API's query; the table is busy
  // until that query answers.
  const filtered = async (urlPart, present) => {
    await page.waitForURL(urlPart);
    await page.locator('table.sandboxes[aria-busy="false"]').waitFor();
    assert.equal(await row(name).count(), present ? 1 : 0, `${urlPart}: the row is ${present ? "missing" : "there"}`);
  };
  await page.getByLabel("State", { exact: true }).selectOption("stopped");
  await filtered(/state=stopped/, false);
  await page.getByLabel("State", { exact: true }).selectOption("running");
  await filtered(/state=running/, true);
  await page.getByLabel("Metadata").fill("suite=nope");
  await page.getByRole("button", { name: "Apply" }).click();
  await filtered(/metadata=suite%3Dnope/, false);
  await page.getByLabel("Metadata").fill("suite=web");
  await page.getByRole("button", { name: "Apply" }).click();
  await filtered(/metadata=suite%3Dweb/, true);
  await page.getByLabel("Parent", { exact: true }).selectOption("none");
  await filtered(/parent=none/, true);
  const projects = page.getByLabel("Project").locator("option");
  assert.ok((await projects.count()) >= 2, "the project filter lists the org's projects");
  await page.getByLabel("Project").selectOption({ index: 1 });
  await filtered(/project=prj_/, true);
  await checkView("03-list-filtered", () => row(name).waitFor());
  await page.getByRole("button", { name: "Clear" }).click();
  await page.waitForURL(url + "/");
  await row(name).waitFor();
  await checkView("03-list", () => row(name).waitFor());
});

test("sandbox page: live metrics charts", slow, async () => {
  await row(name).getByRole("link", { name, exact: true }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
  await page.locator('[data-metric="CPU"]').getByText("%").waitFor();
  const first = await page.locator('[data-metric="Memory"]').innerText();
  assert.match(first, /iB of /);
  // Four charts, and they keep reading (every two seconds): the points grow.
  assert.equal(await page.locator(".chart-box canvas").count(), 4);
  await page.waitForFunction(() => Number(document.querySelector(".charts")?.dataset.points) >= 3, null, { timeout: 60_000 });
  await checkView("04-sandbox-overview", () => page.locator('[data-metric="Disk"]').getByText(" of ").waitFor());
});

test("terminal: type echo hi and read hi; the size follows the box", slow, async () => {
  await go("Terminal");
  await page.locator('[data-conn="connected"]').waitFor({ timeout: 60_000 });
  await typeInTerminal("echo hi");
  await waitLine((l) => l === "hi", '"hi" on a line of its own');
  // At phone width the terminal has fewer columns, and the shell knows.
  const box = page.getByTestId("terminal");
  const wide = Number(await box.getAttribute("data-cols"));
  await page.setViewportSize(phone);
  await page.waitForFunction((w) => Number(document.querySelector("[data-testid=terminal]")?.dataset.cols) < w, wide);
  const cols = await box.getAttribute("data-cols"), rows = await box.getAttribute("data-rows");
  await typeInTerminal("stty size");
  await waitLine((l) => l === `${rows} ${cols}`, `stty size = "${rows} ${cols}"`);
  await page.setViewportSize(desktop);
  await page.waitForFunction((w) => Number(document.querySelector("[data-testid=terminal]")?.dataset.cols) >= w, wide);
  await typeInTerminal("clear; echo $GREETING from $(hostname)");
  await waitLine((l) => l.startsWith("hello from "), "the sandbox's environment");
  await checkView("05-sandbox-terminal", () => page.locator('[data-conn="connected"]').waitFor());
});

test("files: upload a file and download it back, then delete it", async () => {
  await go("Files");
  await page.getByLabel("Path").fill("/tmp");
  await page.getByRole("button", { name: "Open", exact: true }).click();
  const local = join(mkdtempSync(join(tmpdir(), "pt-upload-")), "hello.txt");
  writeFileSync(local, "hello from the dashboard\n");
  await page.getByLabel("Upload to /tmp").setInputFiles(local);
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page.locator('tr[data-name="hello.txt"]').waitFor();
  await checkView("06-sandbox-files", () => page.locator('tr[data-name="hello.txt"]').waitFor());
  const [dl] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download hello.txt" }).click(),
  ]);
  assert.equal(readFileSync(await dl.path(), "utf8"), "hello from the dashboard\n");
  await confirmAction(page.getByRole("button", { name: "Delete hello.txt" }), "Delete");
  await page.locator('tr[data-name="hello.txt"]').waitFor({ state: "detached" });
});

test("snapshot: the one taken appears in the list", slow, async () => {
  await go("Snapshots");
  await confirmAction(page.getByRole("button", { name: `Snapshot ${name}` }).first(), "Take snapshot",
    (d) => d.getByLabel("Name").fill("before-change"));
  await page.getByRole("status").getByText(/Snapshot before-change is ready/).waitFor();
  const snapRow = page.locator("table.snapshots tr", { hasText: "before-change" });
  await snapRow.waitFor();
  assert.match(await snapRow.innerText(), /ready/);
  await checkView("07-sandbox-snapshots", () => snapRow.waitFor());
});

let forkID;

test("fork: a copy appears as a child", slow, async () => {
  await confirmAction(page.getByRole("button", { name: `Fork ${name}` }), "Fork");
  const link = page.locator(".notice a.notice-link").first();
  await link.waitFor();
  forkID = (await link.getAttribute("href")).split("/sandbox/")[1];
  assert.match(forkID, /^sbx_/);
  const copy = (await api("GET", `/v1/sandboxes/${forkID}`)).body;
  assert.equal(copy.parent_id, id);
  await go("Sandboxes", "Sandboxes");
  const copyRow = page.locator(`tr[data-id="${forkID}"]`);
  await copyRow.waitFor();
  assert.match(await copyRow.getAttribute("class"), /child/);
  await waitState(copyRow.locator("[data-state]"), "running");
  await checkView("08-list-fork-child", () => copyRow.waitFor());
});

test("stop and start from the sandbox page, by keyboard", slow, async () => {
  await row(name).getByRole("link", { name, exact: true }).click();
  await page.getByRole("heading", { level: 1, name }).waitFor();
  await confirmAction(page.getByRole("button", { name: `Stop ${name}` }), "Stop");
  await waitState(badge(), "stopped");
  // Start with the keyboard only: Tab to the button, Enter, Tab to the
  // dialog's Start, Enter.
  const start = page.getByRole("button", { name: `Start ${name}` });
  await start.waitFor();
  for (let i = 0; i < 60 && !(await start.evaluate((b) => b === document.activeElement)); i++) await page.keyboard.press("Tab");
  assert.ok(await start.evaluate((b) => b === document.activeElement), "Tab never reached Start");
  await page.keyboard.press("Enter");
  await dialog().waitFor();
  await checkView("09-confirm-start", () => dialog().waitFor());
  const confirm = dialog().getByRole("button", { name: "Start", exact: true });
  for (let i = 0; i < 5 && !(await confirm.evaluate((b) => b === document.activeElement)); i++) await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await dialog().waitFor({ state: "detached" });
  await waitState(badge(), "running");
});

test("resize while stopped: the next start boots at the new size", slow, async () => {
  await confirmAction(page.getByRole("button", { name: `Stop ${name}` }), "Stop");
  await waitState(badge(), "stopped");
  await confirmAction(page.getByRole("button", { name: `Resize ${name}` }), "Resize", async (d) => {
    await d.getByLabel("vCPUs").fill("2");
    await d.getByLabel("RAM (MB)").fill("768");
  });
  await page.getByRole("status").getByText("2 vCPU · 768 MB at the next start").waitFor();
  await page.locator('dd[data-term="Size"]').getByText("2 vCPU · 768 MB RAM").waitFor();
  const sb = (await api("GET", `/v1/sandboxes/${id}`)).body;
  assert.equal(sb.cpu, 2);
  assert.equal(sb.ram_mb, 768);
});

test("archive, then start it again from the archive", slow, async () => {
  await confirmAction(page.getByRole("button", { name: `Archive ${name}` }), "Archive");
  await waitState(badge(), "archived");
  await page.screenshot({ path: join(artifacts, "10-sandbox-archived-1280.png"), fullPage: true });
  await confirmAction(page.getByRole("button", { name: `Start ${name}` }), "Start");
  await waitState(badge(), "running");
  // The terminal opens again on the restored sandbox.
  await go("Terminal");
  await page.locator('[data-conn="connected"]').waitFor({ timeout: 60_000 });
  await typeInTerminal("nproc");
  await waitLine((l) => l === "2", "nproc = 2 after the resize");
});

test("events: the sandbox's own, newest first", async () => {
  await go("Events");
  const first = page.locator("ol.events li").first();
  await first.waitFor();
  const texts = await page.locator('ol.events li[data-type="state_changed"]').allInnerTexts();
  for (const want of ["stopped → archiving", "archiving → archived", "creating → running"]) {
    assert.ok(texts.some((t) => t.includes(want)), `no "${want}" event in:\n${texts.join("\n")}`);
  }
  await checkView("11-sandbox-events", () => first.waitFor());
});

test("preview URLs: a port's URLs and token", async () => {
  await go("Preview URLs");
  await page.getByLabel("Port").fill("8080");
  await page.getByRole("button", { name: "Get URLs" }).click();
  const card = page.locator('[data-port="8080"]');
  await card.waitFor();
  assert.match(await card.locator('dd[data-term="Path URL"]').innerText(), new RegExp(`/${id}/8080/`));
  await card.getByRole("button", { name: "Make port 8080 public" }).click();
  await card.getByText("public", { exact: true }).waitFor();
  await checkView("12-sandbox-previews", () => card.waitFor());
});

test("templates and their builds", async () => {
  await go("Templates", "Templates");
  const tr = page.locator('tr[data-slug="busybox"]');
  await tr.locator('[data-status="ready"]').waitFor();
  await checkView("13-templates", () => tr.waitFor());
  await tr.getByRole("link", { name: "busybox", exact: true }).click();
  await page.getByRole("heading", { level: 1, name: "Template busybox" }).waitFor();
  const builds = page.locator("ol.builds > li");
  await builds.first().waitFor();
  const before = await builds.count();
  await confirmAction(page.getByRole("button", { name: "Build a new version" }), "Build");
  const newest = page.locator(`ol.builds > li[data-version="${before + 1}"]`);
  await newest.waitFor();
  await newest.locator('[data-status="ready"]').waitFor(slow);
  await checkView("14-template-builds", () => newest.waitFor());
});

test("an org template's build shows its log", slow, async () => {
  const slug = `dash-log-${Date.now().toString(36)}`;
  const r = await api("POST", "/v1/templates", { slug, dockerfile: "FROM busybox\nRUN echo dashboard-log-line\n" });
  assert.equal(r.status, 202, JSON.stringify(r.body));
  for (const end = Date.now() + 600_000; ;) {
    const b = await api("GET", `/v1/templates/${slug}/builds/${r.body.id}`);
    if (b.body.status === "ready") break;
    assert.notEqual(b.body.status, "failed", JSON.stringify(b.body));
    assert.ok(Date.now() < end, `build ${r.body.id} still ${b.body.status}`);
    await new Promise((res) => setTimeout(res, 1000));
  }
  await go("Templates", "Templates");
  await page.locator(`tr[data-slug="${slug}"]`).getByRole("link", { name: slug, exact: true }).click();
  await page.getByRole("heading", { level: 1, name: `Template ${slug}` }).waitFor();
  const log = page.locator(`details[data-build="${r.body.id}"]`);
  await log.locator("summary").click();
  const pre = log.locator("pre.log");
  await pre.filter({ hasText: "build ready" }).waitFor();
  const text = await pre.innerText();
  assert.match(text, /Step \d+\/\d+ \(line 2\): RUN echo dashboard-log-line/);
  assert.match(text, /^dashboard-log-line$/m);
  await checkView("14b-template-build-log", () => pre.filter({ hasText: "build ready" }).waitFor());
  assert.equal((await api("DELETE", `/v1/templates/${slug}`)).status, 200);
});

test("org usage: quota and billed usage", async () => {
  await go("Usage", "Usage");
  await page.locator('[data-usage="q-sandboxes"]').waitFor();
  assert.match(await page.locator('[data-usage="q-cpu"]').innerText(), /vCPU of /);
  const billed = page.locator("table.usage tr", { hasText: name });
  await billed.waitFor({ timeout: 60_000 });
  assert.ok(Number(await billed.locator('[data-label="vCPU·h"]').innerText()) > 0, "a running sandbox billed no compute");
  await checkView("15-usage", () => billed.waitFor());
});

test("gVisor: the terminal comes back after a stop and start, its processes intact", slow, async () => {
  const gv = `${name}-gvisor`;
  const r = await api("POST", "/v1/sandboxes", { template: "busybox", name: gv, runtime: "gvisor" });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await go("Sandboxes", "Sandboxes");
  await waitState(stateOf(gv), "running");
  await row(gv).getByRole("link", { name: gv, exact: true }).click();
  await go("Terminal");
  await page.locator('[data-conn="connected"]').waitFor({ timeout: 60_000 });
  // Closing a terminal hangs up its process group, as a real one does
  // (docs/terminal.md), and the stop closes it: what must outlive the
  // session runs in a session of its own.
  await typeInTerminal("setsid sh -c 'echo $$ > /tmp/bg.pid; exec sleep 3000' </dev/null >/dev/null 2>&1 & " +
    "while [ ! -s /tmp/bg.pid ]; do sleep 1; done; echo started $(cat /tmp/bg.pid)");
  const pid = (await waitLine((l) => /^started \d+$/.test(l), "the background pid")).split(" ")[1];
  await confirmAction(page.getByRole("button", { name: `Stop ${gv}` }), "Stop");
  await waitState(badge(), "stopped");
  // ptd ends the session with the stop; the page keeps its output.
  await page.locator('[data-conn="closed"]').waitFor();
  assert.ok((await screenLines()).includes(`started ${pid}`), "the closed session's output is gone");
  await confirmAction(page.getByRole("button", { name: `Start ${gv}` }), "Start");
  await waitState(badge(), "running");
  // Nothing clicked: the terminal opens a new session by itself.
  await page.locator('[data-conn="connected"]').waitFor({ timeout: 60_000 });
  const after = (await api("GET", `/v1/sandboxes/${r.body.id}`)).body;
  assert.equal(after.restore, "memory", `the start did not restore memory: ${after.metadata?.last_start}`);
  await typeInTerminal("kill -0 $(cat /tmp/bg.pid) && echo alive $(cat /tmp/bg.pid)");
  await waitLine((l) => l === `alive ${pid}`, `"alive ${pid}": the process survived the stop`);
  await page.screenshot({ path: join(artifacts, "15b-gvisor-terminal-after-restart-1280.png"), fullPage: true });
  await confirmAction(page.getByRole("button", { name: `Delete ${gv}` }), "Delete");
  await page.getByText("This sandbox was deleted.").waitFor(slow);
});

const child = `${name}-child`;

test("a child created elsewhere appears under its parent", slow, async () => {
  await go("Sandboxes", "Sandboxes");
  const r = await api("POST", "/v1/sandboxes", { template: "busybox", name: child, parent_id: id });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await row(child).waitFor({ timeout: 60_000 });
  assert.match(await row(child).getAttribute("class"), /child/);
  assert.equal(await row(child).locator('[data-label="Parent"] a').getAttribute("href"), `/sandbox/${id}`);
  assert.equal(await row(child).locator('[data-label="Parent"]').innerText(), name);
  // Tree order: the children's rows follow their parent's.
  const ids = await page.locator("tbody tr").evaluateAll((trs) => trs.map((t) => t.dataset.id));
  assert.ok(ids.indexOf(r.body.id) > ids.indexOf(id));
  await waitState(stateOf(child), "running");
});

test("deleting a parent with live children shows the API's conflict", slow, async () => {
  await row(name).getByRole("button", { name: `Delete ${name}`, exact: true }).click();
  await dialog().getByRole("button", { name: "Delete" }).click();
  const alert = dialog().getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.innerText(), /children.*\(conflict\)$/);
  await checkView("16-delete-conflict", () => alert.waitFor());
  await dialog().getByRole("button", { name: "Cancel" }).click();
  assert.equal(await row(name).count(), 1);
  for (const kid of [child, forkID]) {
    const r = page.locator("tr", { has: page.locator(`a[href="/sandbox/${kid}"]`) }).first();
    const label = kid === child ? child : kid;
    await confirmAction(page.getByRole("button", { name: `Delete ${label}`, exact: true }), "Delete");
    await r.waitFor({ state: "detached", timeout: 120_000 });
  }
});

test("delete with confirmation", slow, async () => {
  await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click();
  await dialog().waitFor();
  await dialog().getByRole("button", { name: "Cancel" }).click();
  assert.equal(await row(name).count(), 1);
  await confirmAction(page.getByRole("button", { name: `Delete ${name}`, exact: true }), "Delete");
  await row(name).waitFor({ state: "detached", timeout: 120_000 });
  await page.screenshot({ path: join(artifacts, "17-list-deleted-1280.png"), fullPage: true });
});

test("no console errors (CSP violations included), no failed call but those asked for", () => {
  // The 401 of the bad token and the 409 of the parent's delete are the
  // API answers the tests above asked for; anything else is a fault.
  // Chromium here shares the host's network with ptd, which adds an
  // interface per sandbox; Chromium then drops the requests in flight
  // (ERR_NETWORK_CHANGED). That is the test machine, not the dashboard:
  // every flow above still had to pass through it (reads are repeated,
  // the event stream reconnects).
  const expected = /^Failed to load resource: (the server responded with a status of (401 \(Unauthorized\)|409 \(Conflict\))|net::ERR_NETWORK_CHANGED)$/;
  assert.deepEqual(consoleErrors.filter((e) => !expected.test(e)), []);
  assert.deepEqual(failedCalls, ["GET /v1/sandboxes 401", `DELETE /v1/sandboxes/${id} 409`]);
});
