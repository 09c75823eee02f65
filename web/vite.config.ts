import { defineConfig, type Plugin } from "vite";

// The build is embedded in ptd (web/web.go): hashed files under /assets/,
// no inline scripts (ptd serves a Content-Security-Policy without
// 'unsafe-inline'), and a deterministic output so a test can rebuild and
// compare it with the committed dist/.
export default defineConfig({
  base: "/",
  plugins: [xtermWithoutInlineStyles()],
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: {
    outDir: process.env.PT_WEB_OUT_DIR || "dist",
    emptyOutDir: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    chunkSizeWarningLimit: 1024,
  },
});

/**
 * xterm.js 6 writes its theme, cell-size and scrollbar rules into <style>
 * elements and some cell colours (true colour, contrast fixes) into style
 * attributes. A CSP without 'unsafe-inline' blocks both, which breaks the
 * terminal and reports violations. This rewrites exactly those places in
 * xterm's module: the <style> elements become <pt-xterm-style> elements
 * (src/xterm-style.ts), whose text goes into a constructed stylesheet
 * (not subject to style-src), and the attribute writes go through the
 * CSSOM (element.style), which the CSP allows. The build fails when a
 * pattern is not found the expected number of times, so an xterm upgrade
 * that moves them cannot slip through unadapted.
 */
function xtermWithoutInlineStyles(): Plugin {
  const rewrites: { from: string; to: string; count: number }[] = [
    { from: 'createElement("style")', to: 'createElement("pt-xterm-style")', count: 3 },
    {
      from: 't.setAttribute("style",`${t.getAttribute("style")||""}${e};`)',
      to: "t.style.cssText+=`;${e};`",
      count: 1,
    },
  ];
  return {
    name: "xterm-without-inline-styles",
    enforce: "pre",
    transform(code, id) {
      if (!/[\\/]@xterm[\\/]xterm[\\/]lib[\\/]xterm\.mjs$/.test(id)) return null;
      let out = code;
      for (const r of rewrites) {
        const n = out.split(r.from).length - 1;
        if (n !== r.count) {
          throw new Error(`xterm-without-inline-styles: ${JSON.stringify(r.from)} found ${n} times, want ${r.count}; adapt vite.config.ts to this xterm version`);
        }
        out = out.split(r.from).join(r.to);
      }
      return { code: out, map: null };
    },
  };
}
