// The "Tasks" view: every owner's durable tasks (tool calls that run on after their request),
// newest first: state, tool, owner, age, TTL and the questions a task waits on (by key and
// kind; their contents are never shown). Filtered by status, tool and owner; a working task
// can be cancelled (after a confirm) as its owner's tasks/cancel would, on whichever replica
// runs it. Refreshed every few seconds while the tab is visible.

import * as api from "./api.js";
import { action, ago, badge, button, h, heading, replace, table, updated } from "./dom.js";

const STATUSES = ["working", "input_required", "completed", "failed", "cancelled"];
const LIVE = new Set(["working", "input_required"]);
const BADGE = { working: "neutral", input_required: "warn", completed: "good", failed: "bad", cancelled: "warn" };

/// The filter, kept while the page is open.
const filter = { status: "", tool: "", owner: "" };

/// 42 → "42 s", 300 → "5 min", 7200 → "2 h", 172800 → "2 d".
function span(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 60) return `${seconds} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  if (seconds < 86400) return `${Math.round(seconds / 3600)} h`;
  return `${Math.round(seconds / 86400)} d`;
}

/// "in 12 min" / "3 min ago": a TTL runs out either side of now.
function until(iso) {
  if (!iso) return "never";
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  return s <= 0 ? ago(iso) : `in ${span(s)}`;
}

export async function tasks(root, ctx) {
  const results = h("div", { id: "task-results" });
  const draw = async () => {
    const r = await api.get("/admin/tasks", filter);
    if (!ctx.current()) return;
    replace(results, r.enabled ? taskTable(r, ctx, draw) : h("p", { class: "empty" }, "Tasks are off (tasks.enabled = false): calls never run as tasks."));
    replace(stamp, updated());
  };
  const stamp = h("span", null, updated());
  replace(
    root,
    heading("Tasks", stamp, button("Refresh", action(ctx, draw))),
    h(
      "p",
      { class: "muted" },
      "Tool calls running as durable tasks, and ended ones until their TTL, whoever created them and whichever replica runs them. Newest first.",
    ),
    filters(ctx, draw),
    results,
  );
  await draw();
  ctx.every(3000, draw);
}

/// The filter form: drawn once, so typing is never interrupted by the refresh.
function filters(ctx, draw) {
  const status = h("select", { name: "status", id: "task-status" }, h("option", { value: "" }, "any"), STATUSES.map((s) => h("option", { value: s }, s)));
  status.value = filter.status;
  status.addEventListener("change", () => {
    filter.status = status.value;
    draw().catch(ctx.fail);
  });
  const input = (key, label) =>
    h("div", { class: "field" }, h("label", { for: `task-${key}` }, label), h("input", { type: "search", id: `task-${key}`, name: key, value: filter[key], placeholder: "any", oninput: (e) => (filter[key] = e.target.value.trim()) }));
  return h(
    "form",
    { class: "card filters", id: "task-filter", onsubmit: (e) => (e.preventDefault(), ctx.clearBanner(), draw().catch(ctx.fail)) },
    h("div", { class: "filter-grid" }, h("div", { class: "field" }, h("label", { for: "task-status" }, "Status"), status), input("tool", "Tool"), input("owner", "Owner (subject)")),
    h("div", { class: "form-tools" }, h("span", { class: "spacer" }), h("button", { type: "submit", id: "task-search" }, "Filter")),
  );
}

function taskTable(r, ctx, draw) {
  const cancel = (t) =>
    button(
      "Cancel",
      action(ctx, async () => {
        if (!window.confirm(`Cancel task ${t.id.slice(0, 8)}… (${t.tool}, ${t.owner || "no owner"})? Its tool is stopped and its owner sees it cancelled.`)) return;
        await api.post(`/admin/tasks/${encodeURIComponent(t.id)}/cancel`);
        ctx.note(`Cancelled task ${t.id.slice(0, 8)}… (${t.tool}).`);
        await draw();
      }),
      { class: "secondary", "data-cancel": t.id },
    );
  return [
    r.truncated ? h("p", { class: "muted small" }, "Only the newest are listed: narrow the filter to see older ones.") : null,
    table(
      [
        { label: "State", cell: (t) => [badge(t.status, BADGE[t.status] || "neutral"), t.status_message ? h("div", { class: "small muted" }, t.status_message) : null] },
        { label: "Tool", cell: (t) => h("code", null, t.tool) },
        { label: "Owner", cell: (t) => [t.owner ? h("span", { title: t.issuer || "" }, t.owner) : h("span", { class: "muted" }, "–"), t.server ? h("div", { class: "small muted" }, `at ${t.server}`) : null] },
        { label: "Age", cell: (t) => h("span", { title: t.created_at }, span(t.age_seconds)) },
        { label: "TTL", cell: (t) => [span(t.ttl_seconds), h("div", { class: "small muted", title: t.expires_at || "" }, LIVE.has(t.status) ? "kept while it runs" : `expires ${until(t.expires_at)}`)] },
        { label: "Input waiting", cell: waiting },
        { label: "Task", cell: (t) => [h("code", { title: t.id }, `${t.id.slice(0, 8)}…`), h("div", { class: "small muted" }, [t.era, t.replica ? `on ${t.replica}` : null].filter(Boolean).join(" · "))] },
        { label: "", cell: (t) => (LIVE.has(t.status) ? cancel(t) : null) },
      ],
      r.tasks,
      { empty: "No tasks match.", rowAttrs: (t) => ({ "data-task": t.id, "data-status": t.status }) },
    ),
  ];
}

/// The questions a task waits on: how many, and each one's key and kind.
function waiting(t) {
  const w = t.input_requests || { count: 0, waiting: [] };
  if (!w.count) return h("span", { class: "muted" }, "–");
  const listed = w.waiting.map((q) => h("li", null, h("code", null, q.key), ` ${q.method}`));
  const more = w.count > w.waiting.length ? h("li", { class: "muted" }, `and ${w.count - w.waiting.length} more`) : null;
  return [badge(`${w.count} waiting`, "warn"), h("ul", { class: "paths" }, listed, more)];
}
