// One upstream's page (#upstreams/<name>), from GET /admin/upstreams/{name}: its state and
// where it is, its last error with its time (kept after a reconnect succeeds), its recent
// state changes, the tools it serves, skips (with the reason) and holds for approval, its
// settings (the server redacts what could be a secret) and its charts.

import * as api from "./api.js";
import { action, ago, badge, button, fmtCount, fmtMs, h, heading, json, replace, table, updated } from "./dom.js";
import { seriesPanel } from "./charts.js";

const stateKind = (state) => (state === "connected" ? "good" : state === "connecting" ? "warn" : "bad");
const REASONS = { invalid: "invalid", name_taken: "name taken", not_approved: "not approved" };

export async function upstreamPage(root, ctx, name) {
  // Its state and last error first, then the charts (which keep their own refresh), then the
  // rest; both parts redrawn every 10 s.
  const top = h("div", { id: "upstream-detail", "data-upstream": name });
  const more = h("div", { id: "upstream-more" });
  const draw = async () => {
    const u = await api.get(`/admin/upstreams/${encodeURIComponent(name)}`);
    if (!ctx.current()) return;
    const s = u.status || {};
    const history = u.history || [];
    replace(top, heading(`Upstream ${name}`, updated(), button("Refresh", action(ctx, draw))), h("div", { class: "detail-grid" }, connection(u, s, history), lastError(s)));
    replace(more, rest(u, s, history));
  };
  await draw();
  if (!ctx.current()) return;
  replace(root, h("p", { class: "crumbs" }, h("a", { href: "#upstreams" }, "Upstreams"), " / ", name), top, seriesPanel(ctx, "upstream", name), more);
  ctx.every(10000, draw);
}

function rest(u, s, history) {
  return [
    card("State changes", "upstream-history", historyTable(history)),
    card("Tools", "upstream-tools", tools(u, s)),
    card(
      "Settings",
      "upstream-settings",
      h("p", { class: "muted small" }, "Effective settings. Secrets are named (an environment variable, a file), never shown; a program's environment values, its arguments that hold a credential, and every URL's credentials, query and fragment are redacted. A key inside a URL's path is shown: name it by an environment variable instead."),
      u.settings ? json(u.settings) : h("p", { class: "muted" }, "Not running on this replica."),
      s.stderr && s.stderr.tail && s.stderr.tail.length ? [h("h3", null, "Last lines on stderr"), h("pre", { class: "json" }, s.stderr.tail.join("\n"))] : null,
    ),
  ];
}

function card(title, id, ...content) {
  return h("section", { class: "card", id }, h("h2", null, title), content);
}

function facts(rows) {
  return h("dl", { class: "facts" }, rows.filter(([, v]) => v !== null && v !== undefined && v !== "").map(([k, v]) => [h("dt", null, k), h("dd", null, v)]));
}

function connection(u, s, history) {
  const settings = u.settings || {};
  const stdio = settings.stdio;
  // Both come redacted from the server (a credential in an argument or a URL is `<redacted>`).
  const where = stdio ? h("code", null, [stdio.program, ...(stdio.args || [])].join(" ")) : settings.url ? h("code", null, settings.url) : "–";
  const since = history.length ? history[history.length - 1] : null;
  return card(
    "Connection",
    "upstream-connection",
    facts([
      ["State", [badge(s.state || "unknown", stateKind(s.state)), since ? h("span", { class: "muted small" }, ` since ${fmtMs(since.at_ms)}`) : null]],
      ["Transport", s.transport],
      [stdio ? "Program" : "URL", where],
      ["Protocol", s.protocol_version],
      ["Server", s.server_info ? `${s.server_info.name || ""} ${s.server_info.version || ""}`.trim() : null],
      ["Defined in", s.source === "admin" ? `the admin API, revision ${u.revision ?? s.revision}${u.updated_by ? ` by ${u.updated_by}` : ""}` : "the settings"],
      ["Last listed", s.last_sync_ms ? `${fmtMs(s.last_sync_ms)} (${ago(new Date(s.last_sync_ms).toISOString())})` : null],
      ["Reconnects", fmtCount(s.reconnects)],
    ]),
  );
}

function lastError(s) {
  if (!s.last_error) return card("Last error", "upstream-last-error", h("p", { class: "muted" }, "No error since toolgate started."));
  const over = s.state === "connected";
  return card(
    "Last error",
    "upstream-last-error",
    h("p", { class: `last-error${over ? " past" : ""}` }, s.last_error),
    h("p", { class: "small muted" }, s.last_error_ms ? `at ${fmtMs(s.last_error_ms)} (${ago(new Date(s.last_error_ms).toISOString())})` : "", over ? "; connected again since." : "; not connected now."),
  );
}

function historyTable(history) {
  return table(
    [
      { label: "Time", cell: (c) => fmtMs(c.at_ms) },
      { label: "Change", cell: (c) => [badge(c.from, stateKind(c.from)), " → ", badge(c.to, stateKind(c.to))] },
      { label: "Why", cell: (c) => (c.reason ? h("span", { class: c.to === "disconnected" ? "error-text" : null }, c.reason) : "–") },
    ],
    [...history].reverse(),
    { empty: "No state changes since toolgate started.", rowAttrs: (c) => ({ "data-to": c.to }) },
  );
}

function tools(u, s) {
  const served = u.served || [];
  const skipped = s.skipped_tools || [];
  const held = s.held || [];
  return [
    h("h3", null, `Served (${served.length})`),
    served.length ? h("ul", { class: "name-list", id: "upstream-served" }, served.map((n) => h("li", null, h("a", { href: `#tools/${encodeURIComponent(n)}`, class: "tool-name" }, n)))) : h("p", { class: "muted" }, "None now."),
    h("h3", null, `Skipped (${skipped.length})`),
    table(
      [
        { label: "Tool", cell: (t) => (t.tool ? h("code", null, t.tool) : h("span", { class: "muted" }, "(no name)")) },
        { label: "Reason", cell: (t) => badge(REASONS[t.reason] || t.reason, t.reason === "not_approved" ? "warn" : "bad") },
        { label: "Detail", cell: (t) => t.detail },
      ],
      skipped,
      { empty: "Nothing skipped.", rowAttrs: (t) => ({ "data-skipped": t.reason }) },
    ),
    h("h3", null, `Held for approval (${held.length})`),
    table(
      [
        { label: "Kind", cell: (x) => x.kind },
        { label: "Name", cell: (x) => h("code", null, x.name) },
        { label: "Change", cell: (x) => badge(x.change, "warn") },
        { label: "", cell: () => h("a", { href: "#approvals" }, "review") },
      ],
      held,
      { empty: "Nothing waits for approval." },
    ),
    s.approval_error ? h("p", { class: "error-text small" }, s.approval_error) : null,
  ];
}
