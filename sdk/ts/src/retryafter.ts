/** Retry-After parsing, shared by the errors and the transport (not part of the package's exports). */

/** How long a Retry-After header asks to wait, in ms (seconds or an HTTP date), or undefined. */
export function parseRetryAfter(h: string | null, now = Date.now()): number | undefined {
  if (!h) return undefined;
  const s = h.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(parseFloat(s) * 1000);
  const at = Date.parse(s);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
