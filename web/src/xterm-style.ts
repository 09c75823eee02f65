// <pt-xterm-style>: what xterm.js's <style> elements become in this build
// (vite.config.ts rewrites them). Text written to it goes into a
// constructed stylesheet adopted by the document while the element is
// connected: the dashboard's Content-Security-Policy (style-src 'self',
// no 'unsafe-inline') blocks <style> elements but not constructed sheets.

class XtermStyle extends HTMLElement {
  readonly #sheet = new CSSStyleSheet();
  #text = "";

  // xterm sets and reads the rules as textContent.
  override get textContent(): string {
    return this.#text;
  }
  override set textContent(v: string | null) {
    this.#text = v ?? "";
    this.#sheet.replaceSync(this.#text);
  }

  connectedCallback(): void {
    this.hidden = true;
    if (!document.adoptedStyleSheets.includes(this.#sheet)) {
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, this.#sheet];
    }
  }

  disconnectedCallback(): void {
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this.#sheet);
  }
}

if (!customElements.get("pt-xterm-style")) customElements.define("pt-xterm-style", XtermStyle);
