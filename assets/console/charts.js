// Charts of calls per second (with errors per second) and latency percentiles, over the last
// hour or since the replica started, from GET /admin/series. Plain SVG built with
// createElementNS: no library, nothing inline (the console's CSP allows no inline style), so
// every colour and line comes from a class in console.css and follows the dark scheme. Each
// chart says what it shows in its aria-label; the numbers behind it are in a table below.

import * as api from "./api.js";
import { fmtSeconds, h, replace, table } from "./dom.js";
import { fmtClock, fmtTime, zoneNow } from "./time.js";

const NS = "http://www.w3.org/2000/svg";
/// The drawing's own units: the SVG scales to its box, text with it.
const W = 640;
const H = 220;
const PAD = { left: 64, right: 14, top: 12, bottom: 30 };
/// Tick steps on the time axis (seconds); the first that gives at most 7 ticks is used.
const STEPS = [10, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 604800];

/// The window chosen, kept while the page is open (every chart shows the same one).
let chosen = "hour";

/// An SVG element, like `h` for HTML: attributes set as given, children appended.
function svg(tag, attrs, ...children) {
  const el = document.createElementNS(NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== null && value !== undefined) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// ---- scales and ticks ------------------------------------------------------------------------

/// A round upper bound for `max` (1, 2 or 5 times a power of ten) and its ticks. A `max` that
/// is not a positive finite number, or so small (subnormal) that its step rounds to 0, is
/// charted as 1: a step of 0 would never end the loop.
export function niceTicks(max) {
  const usable = Number.isFinite(max) && max > 0;
  const top = usable ? max : 1;
  const raw = top / 4;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
  if (!(Number.isFinite(step) && step > 0 && top + step > top)) return niceTicks(1);
  const ticks = [];
  for (let v = 0; v <= top + step * 1e-9; v += step) ticks.push(v);
  if (ticks[ticks.length - 1] < top) ticks.push(ticks[ticks.length - 1] + step);
  return ticks;
}

/// Tick times between `from` and `to` (ms), on round multiples of a step that fits.
function timeTicks(from, to) {
  const span = (to - from) / 1000;
  const step = (STEPS.find((s) => span / s <= 7) || STEPS[STEPS.length - 1]) * 1000;
  const ticks = [];
  for (let t = Math.ceil(from / step) * step; t <= to; t += step) ticks.push(t);
  return { ticks, step };
}

function tickLabel(t, step, span) {
  const d = new Date(t);
  const day = `${String(d.getMonth() + 1).padStart(2, "0")}-${String(d.getDate()).padStart(2, "0")}`;
  if (step >= 86400000) return day;
  if (span > 86400000) return `${day} ${fmtClock(d)}`;
  return fmtClock(d, step < 60000);
}

// ---- one chart ------------------------------------------------------------------------------

/// A line chart: `series` are `{label, cls, value: point => number | null, area, dot}` over
/// `points` (`{at: Date}`, one every `interval` ms), between `from` and `to` (Dates);
/// `format` writes a value with its unit (`tick` on the axis, if shorter); `layered` draws the
/// last series first. `summary` is what a screen reader hears.
export function lineChart({ title, points, series, format, tick = format, layered = false, from, to, interval, summary }) {
  const x0 = from.getTime();
  const span = Math.max(to.getTime() - x0, 1000);
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const values = series.flatMap((s) => points.map((p) => s.value(p))).filter((v) => v !== null && Number.isFinite(v));
  const ticks = niceTicks(Math.max(0, ...values));
  const top = ticks[ticks.length - 1];
  const x = (at) => PAD.left + ((at.getTime() - x0) / span) * plotW;
  const y = (v) => PAD.top + plotH - (v / top) * plotH;

  const grid = ticks.map((v) =>
    svg("g", { class: "tick" }, svg("line", { class: "grid-line", x1: PAD.left, x2: W - PAD.right, y1: y(v), y2: y(v) }), svg("text", { class: "axis-label", x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end" }, v === 0 ? "0" : tick(v))),
  );
  const { ticks: times, step } = timeTicks(x0, to.getTime());
  const xAxis = times.map((t) => svg("text", { class: "axis-label", x: x(new Date(t)), y: H - PAD.bottom + 16, "text-anchor": "middle" }, tickLabel(t, step, span)));
  const lines = (layered ? [...series].reverse() : series).map((s) => drawSeries(s, points, x, y, PAD.top + plotH));
  const hover = hoverColumns(points, series, format, x, (interval / span) * plotW);

  return svg(
    "svg",
    { class: "chart-svg", viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `${title}. ${summary}`, preserveAspectRatio: "xMidYMid meet" },
    svg("title", null, title),
    svg("desc", null, summary),
    grid,
    svg("line", { class: "axis-line", x1: PAD.left, x2: W - PAD.right, y1: PAD.top + plotH, y2: PAD.top + plotH }),
    xAxis,
    svg("text", { class: "axis-caption", x: 4, y: H - 2 }, `time (${zoneNow()})`),
    lines,
    hover,
  );
}

/// One series as a line (and an area under it when asked), broken where a value is missing.
function drawSeries(s, points, x, y, baseline) {
  const runs = [];
  let run = [];
  for (const p of points) {
    const v = s.value(p);
    if (v === null || !Number.isFinite(v)) {
      if (run.length) runs.push(run);
      run = [];
    } else {
      run.push([x(p.at), y(v)]);
    }
  }
  if (run.length) runs.push(run);
  const fmt = (n) => n.toFixed(1);
  const line = runs.map((r) => `M${r.map(([a, b]) => `${fmt(a)},${fmt(b)}`).join(" L")}${r.length === 1 ? " h0.1" : ""}`).join(" ");
  // A point with no neighbour would be a speck: it gets a dot of its own.
  const dots = runs.filter((r) => r.length === 1).map(([[a, b]]) => svg("circle", { class: "dot", cx: fmt(a), cy: fmt(b), r: s.dot || 3.5 }));
  const area = s.area ? runs.map((r) => `M${fmt(r[0][0])},${fmt(baseline)} L${r.map(([a, b]) => `${fmt(a)},${fmt(b)}`).join(" L")} L${fmt(r[r.length - 1][0])},${fmt(baseline)} Z`).join(" ") : "";
  return svg("g", { class: `series ${s.cls}`, "data-series": s.cls }, area ? svg("path", { class: "area", d: area }) : null, line ? svg("path", { class: "line", d: line, "data-points": runs.reduce((n, r) => n + r.length, 0) }) : null, dots);
}

/// A transparent column per point whose tooltip (SVG <title>) lists every series' value.
function hoverColumns(points, series, format, x, width) {
  return svg(
    "g",
    { class: "hover-columns" },
    points.map((p) => {
      const lines = series.map((s) => {
        const v = s.value(p);
        return `${s.label}: ${v === null || !Number.isFinite(v) ? "–" : format(v)}`;
      });
      const tip = `${fmtTime(p.at)}${p.partial ? " (in progress)" : ""}\n${p.calls} call${p.calls === 1 ? "" : "s"}, ${p.errors} error${p.errors === 1 ? "" : "s"}\n${lines.join("\n")}`;
      return svg("rect", { class: "hover", x: x(p.at) - width / 2, y: PAD.top, width: Math.max(width, 1), height: H - PAD.top - PAD.bottom }, svg("title", null, tip));
    }),
  );
}

/// The colours of `series`, named.
function legend(series) {
  return h("ul", { class: "legend" }, series.map((s) => h("li", null, h("span", { class: `swatch ${s.cls}`, "aria-hidden": "true" }), s.label)));
}

// ---- the panel: both charts for one scope ------------------------------------------------

const perSecond = (v) => (v >= 100 ? `${Math.round(v)}/s` : v >= 1 ? `${v.toFixed(1)}/s` : `${v.toPrecision(2).replace(/\.?0+$/, "")}/s`);
const errorRate = (p) => (p.calls ? (p.rate * p.errors) / p.calls : p.rate === null ? null : 0);

const TRAFFIC = [
  { label: "calls/s", cls: "s-calls", value: (p) => p.rate, area: true },
  { label: "errors/s", cls: "s-errors", value: errorRate },
];
/// Drawn p99 first and widest, p50 last and thinnest (`layered`): equal percentiles (one call
/// in a bucket) show as layers instead of hiding each other.
const LATENCY = [
  { label: "p50", cls: "s-p50", value: (p) => p.p50, dot: 2.5 },
  { label: "p95", cls: "s-p95", value: (p) => p.p95, dot: 4 },
  { label: "p99", cls: "s-p99", value: (p) => p.p99, dot: 5.5 },
];
/// A latency tick without trailing zeros: "4 s", "2.5 ms".
const latencyTick = (v) => fmtSeconds(v).replace(/(\.\d*?)0+(?= )/, "$1").replace(/\.(?= )/, "");

/// The answer's points with their times as Dates.
function parse(answer) {
  return (answer.points || []).map((p) => ({ ...p, at: new Date(p.t), calls: p.calls || 0, errors: p.errors || 0, rate: p.rate ?? null }));
}

function trafficSummary(points, windowName) {
  const calls = points.reduce((n, p) => n + p.calls, 0);
  const errors = points.reduce((n, p) => n + p.errors, 0);
  const peak = points.reduce((best, p) => (p.rate > 0 && (!best || p.rate > best.rate) ? p : best), null);
  return `${windowName}: ${calls} call${calls === 1 ? "" : "s"}, ${errors} error${errors === 1 ? "" : "s"}${peak ? `; peak ${perSecond(peak.rate)} at ${fmtTime(peak.at)}` : ""}.`;
}

function latencySummary(points) {
  const last = [...points].reverse().find((p) => p.calls > 0 && p.p50 !== null);
  if (!last) return "No latency observed.";
  const worst = points.reduce((m, p) => (p.p99 !== null && p.p99 > m ? p.p99 : m), 0);
  return `Latest (${fmtTime(last.at)}): p50 ${fmtSeconds(last.p50)}, p95 ${fmtSeconds(last.p95)}, p99 ${fmtSeconds(last.p99)}; highest p99 ${fmtSeconds(worst)}.`;
}

/// The buckets with calls, newest first, as a table (what the charts draw, for reading).
function dataTable(points) {
  const rows = points.filter((p) => p.calls > 0).reverse();
  return table(
    [
      { label: "Time", cell: (p) => fmtTime(p.at) },
      { label: "Calls", cell: (p) => String(p.calls) },
      { label: "Errors", cell: (p) => String(p.errors) },
      { label: "Calls/s", cell: (p) => (p.rate === null ? "–" : perSecond(p.rate)) },
      { label: "p50", cell: (p) => fmtSeconds(p.p50) },
      { label: "p95", cell: (p) => fmtSeconds(p.p95) },
      { label: "p99", cell: (p) => fmtSeconds(p.p99) },
    ],
    rows,
    { empty: "No calls in this window." },
  );
}

function chartBox(title, body, series) {
  return h("figure", { class: "chart" }, h("figcaption", null, h("strong", null, title), legend(series)), body);
}

/// Draws `answer` into `box`.
function draw(box, answer) {
  const points = parse(answer);
  const now = new Date(answer.now || Date.now());
  const from = chosen === "hour" ? new Date(now.getTime() - 3600000) : points.length ? points[0].at : new Date(now.getTime() - 60000);
  const windowName = chosen === "hour" ? "Last hour" : "Since start";
  const called = points.some((p) => p.calls > 0);
  const empty = (what) => h("p", { class: "empty chart-empty" }, `No calls yet ${chosen === "hour" ? "in the last hour" : "since start"}: ${what} appear once tools are called.`);
  const interval = (answer.interval_secs || 10) * 1000;
  const traffic = trafficSummary(points, windowName);
  const latency = latencySummary(points);
  replace(
    box,
    h(
      "div",
      { class: "chart-grid" },
      chartBox("Calls per second", called ? lineChart({ title: "Calls and errors per second", points, series: TRAFFIC, format: perSecond, from, to: now, interval, summary: traffic }) : empty("calls"), TRAFFIC),
      chartBox("Latency", called ? lineChart({ title: "Latency percentiles", points, series: LATENCY, format: fmtSeconds, tick: latencyTick, layered: true, from, to: now, interval, summary: latency }) : empty("percentiles"), LATENCY),
    ),
    h("p", { class: "chart-summary muted small" }, `${traffic} ${called ? latency : ""} Buckets of ${interval / 1000} s; times in ${zoneNow()}.`),
    called ? h("details", { class: "chart-data" }, h("summary", null, "The numbers"), dataTable(points)) : null,
  );
}

/// The charts of one scope (`all`, `tool` or `upstream` with its `name`), refreshed every 10 s
/// while the view is shown, with the last hour / since start choice. Returns the element.
export function seriesPanel(ctx, scope, name) {
  const box = h("div", { class: "charts-body" }, h("p", { class: "loading muted" }, "Loading charts…"));
  const choice = (value, label) => h("button", { type: "button", class: `secondary${chosen === value ? " chosen" : ""}`, "data-window": value, "aria-pressed": String(chosen === value) }, label);
  const buttons = [choice("hour", "Last hour"), choice("start", "Since start")];
  const load = async () => {
    let answer;
    try {
      answer = await api.get("/admin/series", { scope, name, window: chosen });
    } catch (error) {
      if (error instanceof api.ApiError && error.needsToken) throw error;
      if (ctx.current()) replace(box, h("p", { class: "error-text" }, `Charts are not available: ${error.message}`));
      return;
    }
    if (ctx.current()) draw(box, answer);
  };
  for (const b of buttons) {
    b.addEventListener("click", () => {
      chosen = b.dataset.window;
      for (const other of buttons) {
        other.classList.toggle("chosen", other === b);
        other.setAttribute("aria-pressed", String(other === b));
      }
      load().catch(ctx.fail);
    });
  }
  load().catch(ctx.fail);
  ctx.every(10000, load);
  return h(
    "section",
    { class: "card charts", "data-scope": scope, "data-name": name || "" },
    h("div", { class: "view-head sub" }, h("h2", null, "Activity"), h("div", { class: "actions segmented", role: "group", "aria-label": "Time window" }, buttons)),
    box,
  );
}
