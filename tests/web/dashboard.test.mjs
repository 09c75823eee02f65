// Drives the dashboard in a real headless Chromium (Debian's) against a
// real ptd: PT_URL, PT_TOKEN and PT_ARTIFACTS (where screenshots go) come
// from web_test.go.
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

let ctx;
let page;
const consoleErrors = [];
const shot = (name) => page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: true });

before(async () => {
  ctx = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), "pt-chromium-")), {
    executablePath: process.env.PT_CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
  });
  page = ctx.pages()[0] ?? (await ctx.newPage());
  page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => consoleErrors.push(String(e)));
});

after(async () => {
  await ctx?.close();
});

const row = (name) => page.locator("tr", { has: page.getByRole("link", { name, exact: true }) });
const stateOf = (name) => row(name).locator("[data-state]");

const api = async (method, path, body) => {
  const r = await fetch(url + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body && JSON.stringify(body),
  });
  return { status: r.status, body: r.status === 204 ? null : await r.json() };
};

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
  await shot("01-signin-error");
});

test("sign in by keyboard keeps the token in sessionStorage, not the URL", async () => {
  await page.getByLabel("API token").fill("");
  await page.getByLabel("API token").focus();
  await page.keyboard.type(token);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
  assert.equal(await page.evaluate(() => sessionStorage.getItem("pt.token")), token);
  assert.ok(!page.url().includes(token));
  await page.locator("#live.on").waitFor(); // the event stream is connected
});

const name = `web-${Date.now().toString(36)}`;

test("create a busybox sandbox and see it turn running without reloading", async () => {
  let loads = 0;
  page.on("load", () => loads++);
  await page.getByLabel("Template").fill("busybox");
  await page.getByLabel("Name").fill(name);
  await page.getByLabel("Metadata").fill("suite=web");
  await page.getByRole("button", { name: "Create sandbox" }).click();
  await row(name).waitFor();
  await stateOf(name).and(page.locator('[data-state="running"]')).waitFor({ timeout: 120_000 });
  assert.equal(loads, 0, "the page reloaded");
  await shot("02-list-running");
});

test("filter by state", async () => {
  await page.getByLabel("State", { exact: true }).selectOption("stopped");
  assert.equal(await row(name).count(), 0);
  await page.getByLabel("State", { exact: true }).selectOption("running");
  assert.equal(await row(name).count(), 1);
  await page.getByLabel("State", { exact: true }).selectOption("");
});

test("stop and start it", async () => {
  await page.getByRole("button", { name: `Stop ${name}` }).click();
  await stateOf(name).and(page.locator('[data-state="stopped"]')).waitFor({ timeout: 120_000 });
  await shot("03-list-stopped");
  // By keyboard: the actions are real buttons.
  await page.getByRole("button", { name: `Start ${name}` }).focus();
  await page.keyboard.press("Enter");
  await stateOf(name).and(page.locator('[data-state="running"]')).waitFor({ timeout: 120_000 });
});

test("sandbox page: details, metrics and files (upload, download, delete)", async () => {
  await page.getByRole("link", { name, exact: true }).click();
  await page.getByRole("heading", { name: "Details" }).waitFor();
  await page.locator("dl.details").getByText("busybox", { exact: true }).waitFor();
  await page.locator("dl.details").getByText("suite=web").waitFor();
  await page.locator("dl.metrics dt", { hasText: "CPU" }).waitFor();
  await page.getByLabel("Path").fill("/tmp");
  await page.getByRole("button", { name: "Open" }).click();
  const local = join(mkdtempSync(join(tmpdir(), "pt-upload-")), "hello.txt");
  writeFileSync(local, "hello from the dashboard\n");
  await page.getByLabel("Upload here").setInputFiles(local);
  await page.getByRole("button", { name: "Upload", exact: true }).click();
  await page.locator('ul.files li[data-name="hello.txt"]').waitFor();
  await shot("04-sandbox-page");
  const [dl] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Download hello.txt" }).click(),
  ]);
  assert.equal(readFileSync(await dl.path(), "utf8"), "hello from the dashboard\n");
  await page.getByRole("button", { name: "Delete hello.txt" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  await page.locator('ul.files li[data-name="hello.txt"]').waitFor({ state: "detached" });
});

test("phone width: no horizontal scroll, controls visible", async () => {
  await page.getByRole("link", { name: "Platinum" }).click();
  await page.getByRole("heading", { name: "Sandboxes" }).waitFor();
  await page.setViewportSize({ width: 390, height: 844 });
  await row(name).waitFor();
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `page is ${overflow}px wider than the phone`);
  assert.ok(await page.getByRole("button", { name: `Delete ${name}`, exact: true }).isVisible());
  await shot("04b-list-phone");
  await page.setViewportSize({ width: 1280, height: 800 });
});

const child = `${name}-child`;

test("a child created elsewhere appears under its parent", async () => {
  const parentID = await row(name).getAttribute("data-id");
  const r = await api("POST", "/v1/sandboxes", { template: "busybox", name: child, parent_id: parentID });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  await row(child).waitFor({ timeout: 60_000 });
  assert.match(await row(child).getAttribute("class"), /child/);
  assert.equal(await row(child).locator('[data-label="Parent"]').innerText(), parentID);
  // Tree order: the child's row follows its parent's.
  const ids = await page.locator("tbody tr").evaluateAll((trs) => trs.map((t) => t.dataset.id));
  assert.equal(ids.indexOf(r.body.id), ids.indexOf(parentID) + 1);
  await stateOf(child).and(page.locator('[data-state="running"]')).waitFor({ timeout: 120_000 });
  await shot("05-list-parent-child");
});

test("deleting a parent with live children shows the API's conflict", async () => {
  await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  const alert = page.getByRole("alert").filter({ hasText: "(conflict)" });
  await alert.waitFor();
  assert.match(await alert.innerText(), /children.*\(conflict\)$/);
  assert.equal(await row(name).count(), 1);
  await shot("06-delete-conflict");
  await page.getByRole("button", { name: `Delete ${child}`, exact: true }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  await row(child).waitFor({ state: "detached", timeout: 120_000 });
});

test("delete with confirmation", async () => {
  await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click();
  const dialog = page.getByRole("dialog");
  await dialog.waitFor();
  await shot("07-confirm-delete");
  await dialog.getByRole("button", { name: "Cancel" }).click();
  assert.equal(await row(name).count(), 1);
  await page.getByRole("button", { name: `Delete ${name}`, exact: true }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
  await row(name).waitFor({ state: "detached", timeout: 120_000 });
  await shot("08-list-deleted");
});

test("no console errors (CSP violations included)", () => {
  // The 401 of the bad token and the 409 of the parent's delete are the
  // API answers the tests above asked for; anything else is a fault.
  const expected = /^Failed to load resource: the server responded with a status of (401 \(Unauthorized\)|409 \(Conflict\))$/;
  assert.deepEqual(consoleErrors.filter((e) => !expected.test(e)), []);
});
