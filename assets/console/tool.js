// One tool's page (#tools/<name>): what it is (from GET /admin/catalog: its listing, origin,
// where calls go, the scopes a call needs) and its charts (calls, errors, latency). A tool not
// served now still has the charts of what it did.

import * as api from "./api.js";
import { badge, h, heading, replace } from "./dom.js";
import { seriesPanel } from "./charts.js";

/// An upstream tool's provenance reads "upstream=<name> tool=<its own name>".
const UPSTREAM = /^upstream=([A-Za-z0-9_-]+) /;

export async function toolPage(root, ctx, name) {
  const catalog = await api.get("/admin/catalog");
  if (!ctx.current()) return;
  const tool = catalog.tools.find((t) => t.name === name);
  replace(
    root,
    h("p", { class: "crumbs" }, h("a", { href: "#tools" }, "Tools"), " / ", name),
    heading(name, tool ? h("a", { class: "button-link", href: `#try/${encodeURIComponent(name)}` }, "Try") : null),
    tool ? about(tool) : h("section", { class: "card" }, h("p", { class: "muted" }, badge("not served", "bad"), " This tool is not served now; its charts show what it did before.")),
    seriesPanel(ctx, "tool", name),
  );
}

function about(tool) {
  const listing = tool.listing || {};
  const upstream = UPSTREAM.exec(tool.provenance || "");
  const row = (label, value) => (value ? [h("dt", null, label), h("dd", null, value)] : null);
  return h(
    "section",
    { class: "card", id: "tool-about", "data-tool": tool.name },
    listing.title ? h("h2", null, listing.title) : null,
    h("p", { class: "desc" }, listing.description || ""),
    h(
      "dl",
      { class: "facts" },
      row("Origin", badge(tool.origin, "neutral")),
      row("Upstream", upstream ? h("a", { href: `#upstreams/${encodeURIComponent(upstream[1])}` }, upstream[1]) : null),
      row("Provenance", tool.provenance ? h("code", null, tool.provenance) : null),
      row("Scopes to call", tool.scopes.length ? tool.scopes.map((s) => h("code", { class: "scope" }, s)) : null),
    ),
  );
}
