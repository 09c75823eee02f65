// Formatting and parsing of what people read and type.

/** Formats a byte count for people (1.5 MiB). */
export function bytes(n: number | undefined | null): string {
  if (n === undefined || n === null || Number.isNaN(n)) return "—";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? Math.round(v) : v.toFixed(1)} ${units[i]}`;
}

export function when(t: string | null | undefined): string {
  return t ? new Date(t).toLocaleString() : "—";
}

/** Parses KEY=VALUE lines (blank lines skipped) into an object. */
export function parsePairs(text: string, what: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split("\n")) {
    const l = line.trim();
    if (!l) continue;
    const i = l.indexOf("=");
    if (i <= 0) throw new Error(`${what}: "${l}" is not KEY=VALUE`);
    out[l.slice(0, i)] = l.slice(i + 1);
  }
  return out;
}

/** Splits a textarea into its non-blank lines (commas also separate when asked). */
export function lines(text: string, commas = false): string[] {
  return text.split(commas ? /[\n,]/ : /\n/).map((l) => l.trim()).filter(Boolean);
}

/** A number input's value, or undefined when it is blank. */
export function optNumber(v: string): number | undefined {
  return v.trim() === "" ? undefined : Number(v);
}

export const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
