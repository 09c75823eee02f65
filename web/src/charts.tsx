// Live metrics of a running sandbox: GET /v1/sandboxes/{id}/metrics every
// two seconds, the last five minutes drawn with uPlot (canvas; it sets
// sizes through the CSSOM, which the CSP allows). Each chart's latest
// value is also text, for people who do not read the canvas.
import "uplot/dist/uPlot.min.css";
import uPlot from "uplot";
import { useEffect, useRef, useState } from "preact/hooks";
import { call, describe, sandboxPath, type Metrics, type Sandbox } from "./api";
import { bytes } from "./format";
import { useInterval } from "./ui";

const intervalMs = 2000;
const keep = 150; // 5 minutes of points

type Series = { label: string; color: string; values: (number | null)[] };

/**
 * One chart. The x axis spans the points read (at least a minute, at
 * most the five minutes kept); the y axis starts at 0 and reaches at least
 * `floor` (CPU: 100 %), so small values do not fill the chart.
 */
function Chart({ title, summary, times, series, fmt, floor = 1 }: {
  title: string;
  summary: string;
  times: number[];
  series: Series[];
  fmt: (v: number) => string;
  floor?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const id = `chart-${title.toLowerCase().replace(/[^a-z]+/g, "-")}`;

  useEffect(() => {
    const el = box.current!;
    const u = new uPlot({
      width: Math.max(200, el.clientWidth),
      height: 140,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      scales: {
        x: {
          time: true,
          // From the points themselves: uPlot pads a single point's
          // range by far more than a minute.
          range: (u) => {
            const xs = u.data[0] ?? [];
            const end = xs.length ? xs[xs.length - 1] : Date.now() / 1000;
            return [Math.min(xs.length ? xs[0] : end, end - 60), end];
          },
        },
        y: { range: (_u, _lo, hi) => [0, Math.max(floor, (hi ?? 0) * 1.1)] },
      },
      axes: [
        { stroke: "#5d6673", grid: { stroke: "#eceff3" }, ticks: { stroke: "#d9dde3" } },
        { stroke: "#5d6673", size: 84, grid: { stroke: "#eceff3" }, ticks: { stroke: "#d9dde3" }, values: (_u, vs) => vs.map(fmt) },
      ],
      series: [{}, ...series.map((s) => ({ label: s.label, stroke: s.color, width: 2, fill: `${s.color}22`, points: { show: (_u: uPlot, _s: number, i0: number, i1: number) => i1 - i0 < 2, size: 6 } }))],
    }, [times, ...series.map((s) => s.values)] as uPlot.AlignedData, el);
    plot.current = u;
    const ro = new ResizeObserver(() => u.setSize({ width: Math.max(200, el.clientWidth), height: 140 }));
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
    };
    // Built once; data updates go through setData below.
  }, []);

  useEffect(() => {
    plot.current?.setData([times, ...series.map((s) => s.values)] as uPlot.AlignedData);
  });

  return (
    <figure class="chart" aria-labelledby={id}>
      <figcaption id={id}><strong>{title}</strong> <span class="muted" data-metric={title}>{summary}</span></figcaption>
      <div ref={box} class="chart-box" aria-hidden="true" />
    </figure>
  );
}

export function MetricsCharts({ s }: { s: Sandbox }) {
  const [points, setPoints] = useState<Metrics[]>([]);
  const [error, setError] = useState<unknown>(null);
  const running = s.state === "running";

  useEffect(() => setPoints([]), [s.id]);
  useInterval(async () => {
    try {
      const m = await call<Metrics>("GET", `${sandboxPath(s.id)}/metrics`);
      setError(null);
      setPoints((p) => [...p.slice(-(keep - 1)), m]);
    } catch (e) {
      setError(e);
    }
  }, intervalMs, running);

  if (!running) return <p class="muted">Metrics are read while the sandbox runs (it is {s.state}).</p>;
  const times = points.map((m) => Date.parse(m.at) / 1000);
  const last = points[points.length - 1];
  // Network counters count since boot: the chart shows their rate.
  const rate = (k: "net_rx_bytes" | "net_tx_bytes") => points.map((m, i) => {
    if (i === 0) return null;
    const dt = times[i] - times[i - 1];
    const dv = m[k] - points[i - 1][k];
    return dt > 0 && dv >= 0 ? dv / dt : null;
  });
  const rx = rate("net_rx_bytes"), tx = rate("net_tx_bytes");
  const lastRate = (r: (number | null)[]) => r.length ? r[r.length - 1] : null;
  return (
    <div>
      {error !== null && <p class="error" role="alert">{describe(error)}</p>}
      <div class="charts" data-points={points.length}>
        <Chart title="CPU" times={times} fmt={(v) => `${v.toFixed(0)} %`} floor={100}
          summary={last ? `${last.cpu_percent.toFixed(1)} % of ${s.cpu} vCPU · ${last.pids} processes` : "reading…"}
          series={[{ label: "CPU", color: "#2f5bd3", values: points.map((m) => m.cpu_percent) }]} />
        <Chart title="Memory" times={times} fmt={bytes}
          summary={last ? `${bytes(last.memory_used_bytes)} of ${bytes(last.memory_limit_bytes)}` : "reading…"} floor={1 << 20}
          series={[{ label: "Used", color: "#7c3aed", values: points.map((m) => m.memory_used_bytes) }]} />
        <Chart title="Disk" times={times} fmt={bytes}
          summary={last ? `${bytes(last.disk_used_bytes)} of ${bytes(last.disk_size_bytes)}` : "reading…"} floor={1 << 20}
          series={[{ label: "Used", color: "#0e7490", values: points.map((m) => m.disk_used_bytes) }]} />
        <Chart title="Network" times={times} fmt={(v) => `${bytes(v)}/s`} floor={1024}
          summary={last ? `in ${bytes(lastRate(rx) ?? 0)}/s · out ${bytes(lastRate(tx) ?? 0)}/s (${bytes(last.net_rx_bytes)} / ${bytes(last.net_tx_bytes)} since boot)` : "reading…"}
          series={[{ label: "In", color: "#137333", values: rx }, { label: "Out", color: "#b45309", values: tx }]} />
      </div>
    </div>
  );
}
