// Org usage (/usage): the org's quota against what its active sandboxes
// hold now (GET /v1/orgs/{id}/quotas), and what each sandbox billed over a
// window (GET /v1/sandboxes/{id}/usage), with totals.
import { useState } from "preact/hooks";
import { ApiError, call, sandboxPath, type OrgQuota, type Project, type Sandbox, type Usage } from "./api";
import { plural } from "./format";
import { ErrorBox, StateBadge, useLoad } from "./ui";

function Meter({ id, label, used, limit, unit }: { id: string; label: string; used: number; limit?: number; unit: string }) {
  const u = unit ? ` ${unit}` : "";
  return (
    <div class="meter">
      <label for={id}>{label}</label>
      {limit ? <meter id={id} min={0} max={limit} value={used} high={limit * 0.8} optimum={0} /> : null}
      <span data-usage={id}>{`${used}${u} of ${limit ? `${limit}${u}` : "no limit"}`}</span>
    </div>
  );
}

const windows: Record<string, () => string | undefined> = {
  month: () => { const d = new Date(); return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)).toISOString(); },
  day: () => new Date(Date.now() - 86_400_000).toISOString(),
  all: () => undefined,
};

/** Runs fn over items, at most n at a time. */
async function pool<T, R>(items: T[], n: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  }));
  return out;
}

export function UsagePage() {
  const [win, setWin] = useState("month");
  const quota = useLoad(async () => {
    const ps = await call<{ rows: Project[] }>("GET", "/v1/projects");
    const org = ps.rows[0]?.org_id;
    if (!org) throw new Error("This token sees no project, so its org is unknown.");
    return call<OrgQuota>("GET", `/v1/orgs/${encodeURIComponent(org)}/quotas`);
  }, []);
  const usage = useLoad(async () => {
    const list = await call<{ rows: Sandbox[] }>("GET", "/v1/sandboxes?limit=200&include=destroyed,failed");
    const from = windows[win]();
    const rows = await pool(list.rows, 4, async (s) => {
      try {
        const u = await call<Usage>("GET", `${sandboxPath(s.id)}/usage${from ? `?from=${encodeURIComponent(from)}` : ""}`);
        return { s, u };
      } catch (e) {
        if (e instanceof ApiError && e.status === 404) return { s, u: null };
        throw e;
      }
    });
    return rows.filter((r): r is { s: Sandbox; u: Usage } => r.u !== null)
      .sort((a, b) => b.u.cpu_seconds - a.u.cpu_seconds || b.u.storage_gb_hours - a.u.storage_gb_hours);
  }, [win]);
  const total = (k: "cpu_seconds" | "ram_gb_seconds" | "storage_gb_hours") =>
    (usage.data ?? []).reduce((a, r) => a + r.u[k], 0);
  const q = quota.data;
  return (
    <main id="main">
      <h1 tabIndex={-1}>Usage</h1>
      <section class="card" aria-labelledby="quota-h">
        <h2 id="quota-h">Quota{q ? <span class="muted mono small"> {q.org_id}</span> : null}</h2>
        <ErrorBox error={quota.error} />
        {q && (
          <div class="meters">
            <Meter id="q-sandboxes" label="Active sandboxes" used={q.usage.sandboxes ?? 0} limit={q.limits.max_sandboxes} unit="" />
            <Meter id="q-cpu" label="vCPUs" used={q.usage.cpu ?? 0} limit={q.limits.max_cpu} unit="vCPU" />
            <Meter id="q-ram" label="RAM" used={q.usage.ram_mb ?? 0} limit={q.limits.max_ram_mb} unit="MB" />
          </div>
        )}
        <p class="muted small">Active sandboxes are those creating, restoring, starting, running or stopping.</p>
      </section>
      <section class="card" aria-labelledby="billed-h">
        <div class="row">
          <h2 id="billed-h" class="grow">Billed usage</h2>
          <label for="u-window">Window</label>
          <select id="u-window" value={win} onChange={(e) => setWin(e.currentTarget.value)}>
            <option value="month">This month (UTC)</option>
            <option value="day">Last 24 hours</option>
            <option value="all">Since each sandbox was created</option>
          </select>
        </div>
        <ErrorBox error={usage.error} />
        {usage.loading && <p class="muted" role="status">Reading usage…</p>}
        {usage.data && (
          <>
            <p data-usage="total">
              {plural(usage.data.length, "sandbox", "sandboxes")}: <strong>{(total("cpu_seconds") / 3600).toFixed(2)} vCPU·h</strong>,{" "}
              <strong>{(total("ram_gb_seconds") / 3600).toFixed(2)} GB·h RAM</strong> running,{" "}
              <strong>{total("storage_gb_hours").toFixed(2)} GB·h</strong> stored while stopped.
            </p>
            <div class="table-wrap">
              <table class="usage">
                <thead><tr><th scope="col">Sandbox</th><th scope="col">State</th><th scope="col">vCPU·h</th><th scope="col">RAM GB·h</th><th scope="col">Storage GB·h</th></tr></thead>
                <tbody>
                  {usage.data.map(({ s, u }) => (
                    <tr key={s.id}>
                      <td data-label="Sandbox">{s.state === "deleted" ? <span class="mono">{s.name ?? s.id}</span> : <a href={`/sandbox/${encodeURIComponent(s.id)}`} data-nav>{s.name ?? s.id}</a>}</td>
                      <td data-label="State"><StateBadge state={s.state} /></td>
                      <td data-label="vCPU·h">{(u.cpu_seconds / 3600).toFixed(3)}</td>
                      <td data-label="RAM GB·h">{(u.ram_gb_seconds / 3600).toFixed(3)}</td>
                      <td data-label="Storage GB·h">{u.storage_gb_hours.toFixed(3)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </>
        )}
      </section>
    </main>
  );
}
