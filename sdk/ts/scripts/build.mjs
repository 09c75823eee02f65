// Builds dist/esm (ES modules) and dist/cjs (CommonJS), each with .d.ts,
// from one source with the pinned tsc, and marks each folder's module type.
import { execFileSync } from "node:child_process";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
rmSync(join(root, "dist"), { recursive: true, force: true });
for (const [cfg, dir, type] of [
  ["tsconfig.esm.json", "esm", "module"],
  ["tsconfig.cjs.json", "cjs", "commonjs"],
]) {
  execFileSync(process.execPath, [tsc, "-p", join(root, cfg)], { stdio: "inherit", cwd: root });
  mkdirSync(join(root, "dist", dir), { recursive: true });
  writeFileSync(join(root, "dist", dir, "package.json"), JSON.stringify({ type }) + "\n");
}
