// Proves the published package works: `npm pack` (prepack builds), install
// the tarball into an empty project, then load it with both `import` and
// `require` and make a real call to the ptd at PT_API_URL with PT_TOKEN.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
if (!process.env.PT_API_URL || !process.env.PT_TOKEN) throw new Error("pack-smoke needs PT_API_URL and PT_TOKEN");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
const work = mkdtempSync(join(tmpdir(), "pt-sdk-pack-"));
try {
  const out = execFileSync(npm, ["pack", "--pack-destination", work, "--loglevel=error"], { cwd: root, encoding: "utf8" });
  const tgz = readdirSync(work).find((f) => f.endsWith(".tgz"));
  if (!tgz) throw new Error("npm pack made no tarball: " + out);
  const app = join(work, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "pack-smoke", private: true }));
  execFileSync(npm, ["install", "--no-audit", "--no-fund", "--loglevel=error", join(work, tgz)], { cwd: app, stdio: "inherit" });
  const call = `
    const c = new Platinum();
    const s = await c.sandboxes.create({ template: "busybox" }, { waitForRunning: true });
    const r = await s.exec(["echo", "packed"]);
    await s.delete();
    if (r.stdout !== "packed\\n" || !(new NotFoundError({ code: "not_found", message: "x" }) instanceof Error)) throw new Error("unexpected " + JSON.stringify(r));
    console.log(KIND + " ok " + s.id);`;
  writeFileSync(join(app, "esm.mjs"), `import { Platinum, NotFoundError } from "@platinum-dev/sdk";\nconst KIND = "import";\n${call}\n`);
  writeFileSync(join(app, "cjs.cjs"), `const { Platinum, NotFoundError } = require("@platinum-dev/sdk");\nconst KIND = "require";\n(async () => {${call}\n})().catch((e) => { console.error(e); process.exit(1); });\n`);
  for (const f of ["esm.mjs", "cjs.cjs"]) execFileSync(process.execPath, [f], { cwd: app, stdio: "inherit" });
  // The declarations resolve for TypeScript consumers of either module kind.
  const typed = `
    const c = new Platinum({ url: "http://127.0.0.1:7070", token: "pt_x" });
    export async function f(): Promise<number> {
      const s: SandboxHandle = await c.sandboxes.create({ template: "busybox", ttlMs: 1000 }, { waitForRunning: true });
      const r = await s.exec(["true"]);
      const e: unknown = null;
      if (e instanceof NotFoundError) return e.status;
      return r.exitCode + (s.ttlMs ?? 0) + s.cpu;
    }`;
  writeFileSync(join(app, "typed.mts"), `import { Platinum, NotFoundError, type SandboxHandle } from "@platinum-dev/sdk";\n${typed}\n`);
  writeFileSync(join(app, "typed.cts"), `import { Platinum, NotFoundError, type SandboxHandle } from "@platinum-dev/sdk";\n${typed}\n`);
  writeFileSync(join(app, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "nodenext", moduleResolution: "nodenext", target: "es2022", strict: true, noEmit: true, types: [], lib: ["es2022", "dom"] }, files: ["typed.mts", "typed.cts"] }));
  execFileSync(process.execPath, [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", app], { stdio: "inherit" });
  console.log("types ok (import and require)");
  const files = execFileSync("tar", ["tzf", join(work, tgz)], { encoding: "utf8" }).split("\n").filter(Boolean);
  for (const want of ["package/dist/esm/index.js", "package/dist/esm/index.d.ts", "package/dist/cjs/index.js", "package/dist/cjs/index.d.ts", "package/README.md"]) {
    if (!files.includes(want)) throw new Error(`the tarball lacks ${want}`);
  }
  if (files.some((f) => f.startsWith("package/src/") || f.startsWith("package/test/"))) throw new Error("the tarball ships sources or tests");
  console.log(`pack-smoke: ${tgz} (${files.length} files) installs and works with import and require`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
