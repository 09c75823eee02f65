import { defineConfig } from "vite";

// The build is embedded in ptd (web/web.go): hashed files under /assets/,
// no inline scripts (ptd serves a Content-Security-Policy without
// 'unsafe-inline'), and a deterministic output so a test can rebuild and
// compare it with the committed dist/.
export default defineConfig({
  base: "/",
  build: {
    outDir: process.env.PT_WEB_OUT_DIR || "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
  },
});
