// The console's views. Each is `async (root, ctx, arg) => void`: it fetches what it shows from
// the admin API, draws it into `root`, and wires its buttons. `ctx` (app.js) gives auto-refresh
// (`every`), error reporting (`fail`), short notes (`note`) and `current()`, which turns false
// once the operator has moved to another view.

import * as api from "./api.js";
import { action, ago, badge, button, fmtBytes, fmtCount, fmtMs, fmtSeconds, fmtTime, h, heading, json, replace, stat, table, updated } from "./dom.js";
import { approvals } from "./approvals.js";
import { grants } from "./grants.js";
import { connections } from "./connections.js";
import { servers } from "./servers.js";
import { tasks } from "./tasks.js";
import { tryTool } from "./try.js";
import { seriesPanel } from "./charts.js";
import { toolPage } from "./tool.js";
import { upstreamPage } from "./upstream.js";

const OUTCOMES = ["ok", "tool_error", "timeout", "cancelled", "denied", "rate_limited", "invalid_input", "internal_error"];
const KINDS = ["tool_call", "auth_failure", "authz_denied", "rate_limited", "registry_change", "admin_change", "task_change", "oauth"];

// ---- Overview -----------------------------------------------------------------------------

async function overview(root, ctx) {
  // The figures are redrawn every 5 s; the charts below them keep their own refresh.
  const figures = h("div", { id: "overview-figures" });
  const draw = async () => {
    const o = await api.get("/admin/overview");
    if (!ctx.current()) return;
    ctx.serverInfo(o.server);
    const http = o.http;
    const calls = o.tool_calls;
    const audit = o.audit;
    // Every outcome has a counter from the first call on; only those that happened are shown.
    const outcomes = Object.entries(calls.by_outcome || {})
      .filter(([, n]) => n > 0)
      .map(([k, n]) => badge(`${k} ${fmtCount(n)}`, k === "ok" ? "good" : "bad"));
    const kinds = Object.entries(o.streams.by_kind || {}).map(([k, n]) => `${k} ${n}`).join(", ");
    const origins = Object.entries(o.tools.by_origin || {}).map(([k, n]) => `${k} ${n}`).join(", ");
    replace(
      figures,
      heading("Overview", updated(), button("Refresh", action(ctx, draw))),
      h("p", { class: "muted" }, "Since this replica started. Counts of the public port's HTTP requests; tool calls from every path, the console's included."),
      h(
        "div",
        { class: "grid" },
        card("HTTP requests", [
          stat("requests", fmtCount(http.requests)),
          stat("4xx", fmtCount(http.client_errors)),
          stat("5xx", fmtCount(http.server_errors)),
          stat("in flight", fmtCount(http.in_flight)),
        ], latency(http.latency_seconds)),
        card("MCP", [stat("JSON-RPC requests", fmtCount(o.mcp.requests)), stat("JSON-RPC errors", fmtCount(o.mcp.jsonrpc_errors))]),
        card("Tool calls", [
          stat("calls", fmtCount(calls.total)),
          stat("not ok", fmtCount(calls.errors)),
          stat("queued now", fmtCount(calls.queued)),
        ], latency(calls.latency_seconds), outcomes.length ? h("div", { class: "chips" }, outcomes) : null),
        card("Sessions and streams", [
          stat("sessions", fmtCount(o.sessions.open), o.sessions.shared ? "shared (Postgres)" : null),
          stat("SSE streams", fmtCount(o.streams.open), kinds || null),
          stat("connections", fmtCount(o.connections.open)),
        ]),
        card(
          "Audit log",
          audit.enabled
            ? [
                stat("queue", `${fmtCount(audit.queue_depth)} / ${fmtCount(audit.queue_capacity)}`),
                stat("spool", fmtBytes(audit.spool_bytes)),
                stat("written", fmtCount(audit.records_written)),
                stat("write failures", fmtCount(audit.write_failures)),
                stat("lost", fmtCount(audit.records_lost)),
              ]
            : [stat("audit", "off", "audit.enabled = false")],
        ),
        card("Rate limits", o.rate_limits.enabled ? [stat("refusals", fmtCount(o.rate_limits.rejections)), stat("tracked keys", fmtCount(o.rate_limits.tracked_keys))] : [stat("limits", "off", "limits.enabled = false")]),
        card("Tools", [stat("served", fmtCount(o.tools.served), origins || null)]),
        card("Upstreams", [stat("connected", `${o.upstreams.connected} / ${o.upstreams.configured}`)]),
      ),
    );
  };
  await draw();
  if (!ctx.current()) return;
  replace(root, figures, seriesPanel(ctx, "all"));
  ctx.every(5000, draw);
}

function card(title, stats, ...more) {
  return h("section", { class: "card" }, h("h2", null, title), h("div", { class: "stats" }, stats), more);
}

function latency(l) {
  if (!l || !l.count) return h("p", { class: "muted small" }, "latency: no observations yet");
  return h("p", { class: "small" }, `latency p50 ${fmtSeconds(l.p50)} · p95 ${fmtSeconds(l.p95)} · p99 ${fmtSeconds(l.p99)} · mean ${fmtSeconds(l.mean)}`);
}

// ---- Tools ----------------------------------------------------------------------------------

async function tools(root, ctx, name) {
  if (name) return toolPage(root, ctx, name);
  let filter = "";
  const draw = async () => {
    const [catalog, stored, sources] = await Promise.all([api.get("/admin/catalog"), api.get("/admin/tools"), api.get("/admin/sources")]);
    if (!ctx.current()) return;
    // Served tools (catalog) and stored definitions (maybe disabled, maybe not served) by name.
    const rows = new Map();
    for (const t of catalog.tools) rows.set(t.name, { name: t.name, served: t });
    for (const s of stored.tools) rows.set(s.name, { ...(rows.get(s.name) || { name: s.name }), stored: s });
    const all = [...rows.values()].sort((a, b) => a.name.localeCompare(b.name));
    const list = h("div", { id: "tool-list" });
    const drawList = () => {
      const shown = all.filter((r) => !filter || r.name.toLowerCase().includes(filter.toLowerCase()));
      replace(list, toolTable(shown, ctx, draw));
    };
    const search = h("input", { type: "search", placeholder: "Filter by name", value: filter, "aria-label": "Filter tools by name" });
    search.addEventListener("input", () => {
      filter = search.value;
      drawList();
    });
    replace(
      root,
      heading("Tools", updated(), button("Reload sources", action(ctx, () => reload(ctx, draw)), { id: "reload" })),
      sourcesPanel(sources),
      h("div", { class: "view-head sub" }, h("h2", null, `${all.length} tools`), search),
      list,
    );
    drawList();
  };
  await draw();
}

function sourcesPanel(s) {
  const state = (src) => (src.last_error ? badge("last reload refused", "bad") : src.loaded_at ? badge("ok", "good") : badge("not loaded", "neutral"));
  const error = (src) => (src.last_error ? h("details", null, h("summary", null, "what was wrong"), json(src.last_error)) : null);
  const rows = [
    { source: "tools file", where: s.file.configured ? `${s.file.path}${s.file.watch ? " (watched)" : ""}` : "not configured (tools.path)", tools: s.file.tools, at: s.file.loaded_at, state: s.file.configured ? state(s.file) : badge("off", "neutral"), error: error(s.file) },
    { source: "database", where: "admin API", tools: s.database.tools, at: s.database.loaded_at, state: state(s.database), error: error(s.database) },
    { source: "code", where: "built-in packs", tools: s.code.tools, at: null, state: badge("ok", "good"), error: null },
    ...(s.upstreams || []).map((u) => ({
      source: `upstream ${u.name}`,
      where: `${u.transport}${u.source === "admin" ? " (admin API)" : ""}`,
      tools: u.tools,
      at: u.last_sync_ms ? new Date(u.last_sync_ms).toISOString() : null,
      state: badge(u.state, u.state === "connected" ? "good" : u.state === "connecting" ? "warn" : "bad"),
      error: u.last_error && u.state !== "connected" ? h("span", { class: "error-text" }, u.last_error) : null,
    })),
  ];
  return h(
    "section",
    { class: "card", id: "sources" },
    h("h2", null, "Sources"),
    table(
      [
        { label: "Source", cell: (r) => h("strong", null, r.source) },
        { label: "Where", cell: (r) => r.where },
        { label: "Tools", cell: (r) => fmtCount(r.tools) },
        { label: "Last reload", cell: (r) => (r.at ? h("span", { title: fmtTime(r.at) }, ago(r.at)) : "–") },
        { label: "State", cell: (r) => [r.state, r.error] },
      ],
      rows,
    ),
  );
}

async function reload(ctx, redraw) {
  try {
    const r = await api.post("/admin/reload");
    const summary = (x) => (x.status === "ok" ? `+${x.report.added.length} ~${x.report.changed.length} −${x.report.removed.length}` : x.status.replace("_", " "));
    ctx.note(`Reloaded. Tools file: ${summary(r.file)}; database: ${summary(r.database)}.`);
  } catch (error) {
    // 422: a source was refused (its previous tools stay); the banner lists every problem.
    ctx.fail(error);
  }
  await redraw();
}

function toolTable(rows, ctx, redraw) {
  const origin = (r) => (r.served ? r.served.origin : "database");
  const state = (r) => {
    if (r.stored && !r.stored.enabled) return badge("disabled", "warn");
    if (r.served) return badge("served", "good");
    return badge("not served", "bad");
  };
  const toggle = (r, enable) =>
    action(ctx, async () => {
      const verb = enable ? "enable" : "disable";
      const row = await api.post(`/admin/tools/${encodeURIComponent(r.name)}/${verb}`);
      ctx.note(`${row.name} ${enable ? "enabled" : "disabled"} (revision ${row.revision}).`);
      await redraw();
    });
  return table(
    [
      {
        label: "Tool",
        cell: (r) => {
          const listing = r.served ? r.served.listing : r.stored ? r.stored.definition : {};
          const label = h("strong", { class: "tool-name" }, r.name);
          return [r.served ? h("a", { href: `#tools/${encodeURIComponent(r.name)}`, class: "tool-link" }, label) : label, listing.title ? h("span", { class: "muted" }, ` ${listing.title}`) : null, h("div", { class: "desc muted" }, listing.description || "")];
        },
      },
      {
        label: "Origin",
        cell: (r) => [
          badge(origin(r), "neutral"),
          r.served && r.served.provenance ? h("div", { class: "small muted" }, r.served.provenance) : null,
          r.stored ? h("div", { class: "small muted" }, `rev ${r.stored.revision}${r.stored.updated_by ? ` by ${r.stored.updated_by}` : ""}, ${ago(r.stored.updated_at)}`) : null,
        ],
      },
      { label: "State", cell: state },
      { label: "Scopes to call", cell: (r) => (r.served && r.served.scopes.length ? r.served.scopes.map((s) => h("code", { class: "scope" }, s)) : h("span", { class: "muted" }, "–")) },
      {
        label: "",
        cell: (r) => {
          const buttons = [];
          if (r.stored) {
            buttons.push(r.stored.enabled ? button("Disable", toggle(r, false), { class: "secondary", "data-action": "disable" }) : button("Enable", toggle(r, true), { "data-action": "enable" }));
          } else {
            buttons.push(h("span", { class: "muted small", title: "Only tools stored through the admin API can be switched here" }, origin(r) === "file" ? "edit the tools file" : origin(r) === "upstream" ? "from an upstream" : "built in"));
          }
          if (r.served) buttons.push(h("a", { class: "button-link", href: `#try/${encodeURIComponent(r.name)}` }, "Try"));
          return h("div", { class: "row-actions" }, buttons);
        },
      },
    ],
    rows,
    { empty: "No tools match.", rowAttrs: (r) => ({ "data-tool": r.name }) },
  );
}

// ---- Upstreams -------------------------------------------------------------------------------

async function upstreams(root, ctx, name) {
  if (name) return upstreamPage(root, ctx, name);
  const draw = async () => {
    const { upstreams: list } = await api.get("/admin/upstreams");
    if (!ctx.current()) return;
    replace(
      root,
      heading("Upstreams", updated(), button("Refresh", action(ctx, draw))),
      h("p", { class: "muted" }, "Upstream MCP servers whose tools are served here ([upstreams.<name>] in the settings, or PUT /admin/upstreams/{name})."),
      table(
        [
          {
            label: "Name",
            cell: (u) => {
              const page = `#upstreams/${encodeURIComponent(u.name)}`;
              return [h("a", { href: page, class: "upstream-link" }, h("strong", null, u.name)), h("div", { class: "small" }, h("a", { href: page, class: "muted" }, u.source === "admin" ? `admin API, rev ${u.revision}` : "settings"))];
            },
          },
          { label: "Transport", cell: (u) => u.transport },
          { label: "State", cell: (u) => badge(u.state, u.state === "connected" ? "good" : u.state === "connecting" ? "warn" : "bad") },
          { label: "Tools", cell: (u) => [fmtCount(u.tools), u.skipped && u.skipped.length ? h("details", null, h("summary", null, `${u.skipped.length} skipped`), h("ul", null, u.skipped.map((s) => h("li", null, s)))) : null] },
          { label: "Held", cell: (u) => [u.held && u.held.length ? h("a", { href: "#approvals" }, badge(`${u.held.length} waiting`, "warn")) : "–", u.approval_error ? h("div", { class: "error-text small" }, u.approval_error) : null] },
          { label: "Server", cell: (u) => (u.server_info ? `${u.server_info.name || ""} ${u.server_info.version || ""}` : "–") },
          { label: "Protocol", cell: (u) => u.protocol_version || "–" },
          { label: "Last sync", cell: (u) => (u.last_sync_ms ? h("span", { title: fmtMs(u.last_sync_ms) }, ago(new Date(u.last_sync_ms).toISOString())) : "–") },
          { label: "Reconnects", cell: (u) => fmtCount(u.reconnects) },
          {
            label: "Last error",
            cell: (u) => (u.last_error ? [h("span", { class: u.state === "connected" ? null : "error-text" }, u.last_error), u.last_error_ms ? h("div", { class: "small muted", title: fmtMs(u.last_error_ms) }, ago(new Date(u.last_error_ms).toISOString())) : null] : "–"),
          },
        ],
        list,
        { empty: "No upstream MCP servers are configured." },
      ),
    );
  };
  await draw();
  ctx.every(10000, draw);
}

// ---- Sessions ---------------------------------------------------------------------------------

async function sessions(root, ctx) {
  const draw = async () => {
    const s = await api.get("/admin/sessions");
    if (!ctx.current()) return;
    replace(
      root,
      heading("Sessions", updated(), button("Refresh", action(ctx, draw))),
      h(
        "div",
        { class: "grid compact" },
        card("Now", [
          stat("2025-11-25 sessions", fmtCount(s.open), `Mcp-Session-Id (and older versions); ${s.shared ? "shared with other replicas" : "this replica"}`),
          stat("their open streams", fmtCount(s.open_streams)),
          stat("listen streams", fmtCount(s.listen_streams), "2026-07-28 subscriptions/listen"),
        ]),
      ),
      h("p", { class: "muted" }, "Sessions exist for protocol 2025-11-25 and older; 2026-07-28 requests are stateless. Ids are shown by prefix only.", s.truncated ? " Only the most recently used are listed." : ""),
      table(
        [
          { label: "Session", cell: (x) => h("code", null, `${x.id_prefix}…`) },
          { label: "Transport", cell: (x) => x.transport },
          { label: "Protocol", cell: (x) => x.protocol_version },
          { label: "Client", cell: (x) => (x.client ? `${x.client.name} ${x.client.version}` : h("span", { class: "muted" }, "not initialized")) },
          { label: "Subject", cell: (x) => x.subject || h("span", { class: "muted" }, "–") },
          { label: "Created", cell: (x) => h("span", { title: fmtTime(x.created_at) }, ago(x.created_at)) },
          { label: "Last seen", cell: (x) => h("span", { title: fmtTime(x.last_seen_at) }, ago(x.last_seen_at)) },
          { label: "Open streams", cell: (x) => (x.open_streams ? badge(String(x.open_streams), "good") : "0") },
        ],
        s.sessions,
        { empty: "No live sessions." },
      ),
    );
  };
  await draw();
  ctx.every(10000, draw);
}

// ---- Audit ---------------------------------------------------------------------------------------

/// The audit filter, kept while the page is open (moving between views keeps it).
const auditFilter = { tool: "", subject: "", outcome: "", kind: "", since: "", until: "", limit: "100" };

/// datetime-local (local time, no zone) → RFC 3339 UTC, as the API wants it.
const toRfc3339 = (local) => (local ? new Date(local).toISOString() : "");

/// A Date → the value a datetime-local input takes, in local time.
function toLocalInput(d) {
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function auditQuery() {
  return { ...auditFilter, since: toRfc3339(auditFilter.since), until: toRfc3339(auditFilter.until) };
}

async function audit(root, ctx) {
  const names = await api.get("/admin/catalog").then((c) => c.tools.map((t) => t.name)).catch(() => []);
  if (!ctx.current()) return;
  const results = h("div", { id: "audit-results" });
  const input = (key, attrs) => {
    const el = h("input", { id: `audit-${key}`, name: key, value: auditFilter[key], ...attrs });
    el.addEventListener("input", () => (auditFilter[key] = el.value));
    return el;
  };
  const select = (key, options) => {
    const el = h("select", { id: `audit-${key}`, name: key }, h("option", { value: "" }, "any"), options.map((o) => h("option", { value: o }, o)));
    el.value = auditFilter[key];
    el.addEventListener("change", () => (auditFilter[key] = el.value));
    return el;
  };
  const labelled = (text, key, control) => h("div", { class: "field" }, h("label", { for: `audit-${key}` }, text), control);
  const since = input("since", { type: "datetime-local" });
  const preset = (label, minutes) =>
    button(label, () => {
      since.value = toLocalInput(new Date(Date.now() - minutes * 60000));
      auditFilter.since = since.value;
    }, { class: "link" });

  const search = async () => {
    replace(results, h("p", { class: "loading muted" }, "Searching…"));
    const r = await api.get("/admin/audit", auditQuery());
    if (!ctx.current()) return;
    replace(results, auditTable(r));
  };
  const exportAs = (format) =>
    action(ctx, async () => {
      const file = await api.download("/admin/audit/export", { ...auditQuery(), format, limit: "" });
      ctx.note(`Exported ${file.name} (${fmtBytes(file.bytes)}).`);
    });

  const form = h(
    "form",
    // novalidate: the API checks every value and says what it accepts; one voice for errors.
    { class: "card filters", id: "audit-form", novalidate: true },
    h(
      "div",
      { class: "filter-grid" },
      labelled("Tool", "tool", input("tool", { type: "text", list: "audit-tools", placeholder: "any" })),
      h("datalist", { id: "audit-tools" }, names.map((n) => h("option", { value: n }))),
      labelled("Subject", "subject", input("subject", { type: "text", placeholder: "any" })),
      labelled("Outcome", "outcome", select("outcome", OUTCOMES)),
      labelled("Event kind", "kind", select("kind", KINDS)),
      labelled("Since", "since", since),
      labelled("Until", "until", input("until", { type: "datetime-local" })),
      labelled("Limit", "limit", input("limit", { type: "number", min: 1, max: 1000 })),
    ),
    h(
      "div",
      { class: "form-tools" },
      h("span", { class: "muted small" }, "Since: "),
      preset("last 15 min", 15),
      preset("last hour", 60),
      preset("last 24 h", 1440),
      h("span", { class: "spacer" }),
      h("button", { type: "submit", id: "audit-search" }, "Search"),
      button("Export CSV", exportAs("csv"), { class: "secondary", id: "export-csv" }),
      button("Export JSON lines", exportAs("jsonl"), { class: "secondary", id: "export-jsonl" }),
    ),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    ctx.clearBanner();
    search().catch(ctx.fail);
  });
  replace(root, heading("Audit log"), form, results);
  await search();
}

function auditTable(r) {
  const outcome = (o) => badge(o, o === "ok" ? "good" : o === "tool_error" || o === "cancelled" ? "warn" : "bad");
  return [
    h("p", { class: "muted" }, `${r.records.length} record${r.records.length === 1 ? "" : "s"}, newest first.`, r.truncated ? " More match: narrow the filters or raise the limit." : "", r.audit_enabled ? "" : " The audit log is off (audit.enabled = false): nothing new is recorded."),
    table(
      [
        { label: "Time", cell: (x) => h("span", { title: x.time }, fmtTime(x.time)) },
        { label: "Kind", cell: (x) => x.kind },
        { label: "Outcome", cell: (x) => outcome(x.outcome) },
        { label: "Tool", cell: (x) => x.tool || "–" },
        { label: "Subject", cell: (x) => x.subject || "–" },
        { label: "Detail", cell: (x) => x.detail || "" },
        { label: "ms", cell: (x) => (x.duration_ms === null || x.duration_ms === undefined ? "" : fmtCount(x.duration_ms)) },
      ],
      r.records,
      {
        empty: "No records match.",
        rowAttrs: (x) => ({ "data-kind": x.kind, "data-tool": x.tool || "" }),
        // The whole record opens below its row, across the table, not squeezed into a column.
        expand: { label: "Record", toggle: (x) => x.request_id || x.id.slice(0, 8), content: (x) => json(x) },
      },
    ),
  ];
}

export const views = { overview, tools, upstreams, approvals, servers, sessions, grants, connections, audit, tasks, try: tryTool };
