// Regenerates the wire types from api/openapi.yaml and fails when they
// differ from the checked-in src/generated/openapi.ts, so the SDK cannot
// drift from the spec. Fix a failure with `npm run gen` and commit.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dir = mkdtempSync(join(tmpdir(), "pt-gen-"));
try {
  const out = join(dir, "openapi.ts");
  const cli = join(root, "node_modules", "openapi-typescript", "bin", "cli.js");
  execFileSync(process.execPath, [cli, join(root, "..", "..", "api", "openapi.yaml"), "--default-non-nullable", "false", "-o", out], { stdio: ["ignore", "ignore", "inherit"] });
  const want = readFileSync(out, "utf8");
  const have = readFileSync(join(root, "src", "generated", "openapi.ts"), "utf8");
  if (want !== have) {
    console.error("src/generated/openapi.ts is stale: api/openapi.yaml changed. Run `npm run gen` in sdk/ts and commit the result.");
    process.exit(1);
  }
  console.log("src/generated/openapi.ts matches api/openapi.yaml");
} finally {
  rmSync(dir, { recursive: true, force: true });
}
