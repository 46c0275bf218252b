// The "Approvals" view: the approved catalog's held changes (src/approval). Each new or changed
// tool, resource or prompt of an upstream waits here with what differs from the version approved
// now: every field before (red) and after (green), and for schemas the JSON pointers added,
// removed and changed. Approving puts it live on every replica (clients then hear list_changed);
// rejecting keeps the approved version. All text comes from upstreams: it is set as text, never
// parsed as HTML (dom.js).

import * as api from "./api.js";
import { action, ago, badge, button, h, heading, replace, updated } from "./dom.js";

/// The filter, kept while the page is open.
const filter = { state: "pending", source: "" };

const iso = (ms) => (ms ? new Date(ms).toISOString() : null);
const text = (value) => (value === null || value === undefined ? "(absent)" : typeof value === "string" ? value : JSON.stringify(value, null, 2));

/// One field's change: before and after side by side, with the schema paths below.
function field(d) {
  const paths = d.paths
    ? h(
        "ul",
        { class: "paths" },
        d.paths.added.map((p) => h("li", { class: "added" }, "+ ", h("code", null, p))),
        d.paths.removed.map((p) => h("li", { class: "removed" }, "− ", h("code", null, p))),
        d.paths.changed.map((p) => h("li", { class: "changed" }, "~ ", h("code", null, p))),
      )
    : null;
  return h(
    "div",
    { class: "diff-field" },
    h("h3", null, d.field),
    h("div", { class: "diff-pair" }, h("pre", { class: "diff-before", "aria-label": "before" }, text(d.before)), h("pre", { class: "diff-after", "aria-label": "after" }, text(d.after))),
    paths,
  );
}

/// One held (or decided) entry as a card.
function card(x, ctx, draw) {
  const decide = (verb, label, cls) =>
    button(
      label,
      action(ctx, async () => {
        await api.request("POST", `/admin/approvals/${encodeURIComponent(x.id)}/${verb}`);
        ctx.note(`${verb === "approve" ? "Approved" : "Rejected"} the ${x.kind} ${x.name} of ${x.source}.`);
        await draw();
      }),
      { class: cls, "data-approval": x.id, "data-verb": verb },
    );
  const body = x.diff
    ? x.diff.map(field)
    : [h("p", { class: "muted" }, x.change === "new" ? "New: nothing of it is served until it is approved." : ""), h("pre", { class: "diff-after" }, text(x.entry))];
  return h(
    "section",
    { class: "card approval", "data-id": x.id },
    h(
      "div",
      { class: "view-head" },
      h("h2", null, badge(x.kind), " ", h("code", null, x.name), " ", h("span", { class: "muted" }, `from ${x.source}`)),
      h(
        "div",
        { class: "actions" },
        badge(x.change ? `${x.change} · ${x.state}` : x.state, x.state === "pending" ? "warn" : x.state === "approved" ? "good" : x.state === "rejected" ? "bad" : "neutral"),
        x.state === "pending" ? [decide("approve", "Approve", ""), decide("reject", "Reject", "secondary")] : null,
      ),
    ),
    h("p", { class: "muted small" }, `first seen ${ago(iso(x.first_seen_ms))}`, x.decided_by ? ` · decided by ${x.decided_by} ${ago(iso(x.decided_ms))}` : "", ` · fingerprint ${x.fingerprint.slice(0, 16)}`),
    body,
  );
}

export async function approvals(root, ctx) {
  const draw = async () => {
    const found = await api.get("/admin/approvals", { state: filter.state, source: filter.source });
    if (!ctx.current()) return;
    const form = h(
      "form",
      { class: "card filters", onsubmit: (e) => (e.preventDefault(), draw().catch(ctx.fail)) },
      h(
        "label",
        null,
        "State ",
        h(
          "select",
          { name: "state", onchange: (e) => (filter.state = e.target.value) },
          ["pending", "approved", "rejected", "superseded", "all"].map((s) => h("option", { value: s, selected: s === filter.state }, s)),
        ),
      ),
      h("label", null, "Upstream ", h("input", { type: "search", name: "source", value: filter.source, oninput: (e) => (filter.source = e.target.value.trim()) })),
      h("button", { type: "submit" }, "Filter"),
    );
    replace(
      root,
      heading("Approvals", updated(), button("Refresh", action(ctx, draw))),
      h(
        "p",
        { class: "muted" },
        "Tools, resources and prompts an upstream added or changed after they were approved (upstreams.<name>.approval). A change keeps serving its approved version until approved here; a new entry is not served.",
      ),
      form,
      found.approvals.length ? found.approvals.map((x) => card(x, ctx, draw)) : h("p", { class: "empty" }, filter.state === "pending" ? "Nothing waits for approval." : "Nothing matches."),
    );
  };
  await draw();
  ctx.every(15000, draw);
}
