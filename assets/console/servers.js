// The "Servers" view: the virtual servers (an MCP endpoint per team), each with its path, the
// tools it serves now under which names and from which sources, and any tool left out because
// two would share a name. Servers defined through the admin API are edited here (the JSON of one
// `[servers.<name>]` table, checked completely by the server before anything is stored) and
// deleted; the settings' own are shown read-only.

import * as api from "./api.js";
import { action, badge, button, h, heading, json, problemCard, replace, table, updated } from "./dom.js";

const TEMPLATE = { path: "/teams/example/mcp", title: "Example team", tools: ["echo"], overrides: { echo: { name: "say" } }, scopes: [] };


/// The editor: a name and the definition as JSON; Save stores it (PUT), conditionally on the
/// revision it was opened at.
function editor(ctx, { name = "", definition = TEMPLATE, revision = null }, saved) {
  const status = h("div", { class: "editor-status" });
  const nameInput = h("input", { type: "text", name: "server-name", value: name, readonly: Boolean(name), required: true, pattern: "[a-z0-9_-]{1,32}" });
  const text = h("textarea", { name: "server-definition", rows: 12, class: "mono" });
  text.value = JSON.stringify(definition, null, 2);
  const form = h(
    "form",
    { class: "card editor", novalidate: true },
    h("h2", null, name ? `Edit ${name}` : "New server"),
    h("label", null, "Name ", nameInput),
    h("label", null, "Definition (one [servers.<name>] table as JSON)", text),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Save")),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    let body;
    try {
      body = JSON.parse(text.value);
    } catch (e) {
      replace(status, h("div", { class: "card problem" }, `The definition is not valid JSON: ${e.message}`));
      return;
    }
    const target = nameInput.value.trim();
    try {
      await api.request("PUT", `/admin/servers/${encodeURIComponent(target)}`, { body, headers: revision ? { "If-Match": `"${revision}"` } : undefined });
      ctx.note(`Saved the server ${target}.`);
      await saved();
    } catch (error) {
      if (error instanceof api.ApiError && !error.needsToken) replace(status, problemCard(error));
      else ctx.fail(error);
    }
  });
  return form;
}

export async function servers(root, ctx) {
  let open = null;
  let editing = null;
  const draw = async () => {
    const list = await api.get("/admin/servers");
    if (!ctx.current()) return;
    const detail = open ? await api.get(`/admin/servers/${encodeURIComponent(open)}`).catch(() => null) : null;
    const show = (x) => button(open === x.name ? "Hide" : "Show", action(ctx, async () => ((open = open === x.name ? null : x.name), await draw())), { class: "secondary", "data-show": x.name });
    const edit = (x) =>
      button(
        "Edit",
        action(ctx, async () => {
          const one = await api.get(`/admin/servers/${encodeURIComponent(x.name)}`);
          editing = { name: x.name, definition: one.definition, revision: one.revision };
          await draw();
        }),
        { class: "secondary", "data-edit": x.name },
      );
    const remove = (x) =>
      button(
        "Delete",
        action(ctx, async () => {
          if (!window.confirm(`Delete the server ${x.name}? Its path ${x.path} stops answering.`)) return;
          await api.request("DELETE", `/admin/servers/${encodeURIComponent(x.name)}`);
          ctx.note(`Deleted the server ${x.name}.`);
          if (open === x.name) open = null;
          await draw();
        }),
        { class: "secondary", "data-delete": x.name },
      );
    const done = async () => ((editing = null), await draw());
    replace(
      root,
      heading("Servers", updated(), button("New server", action(ctx, async () => ((editing = {}), await draw())), { id: "new-server" }), button("Refresh", action(ctx, draw))),
      h("p", { class: "muted" }, `Each virtual server is an MCP endpoint of its own serving part of the catalog; ${list.default_path} serves everything.`),
      editing ? editor(ctx, editing, done) : null,
      table(
        [
          { label: "Name", cell: (x) => h("strong", null, x.name) },
          { label: "Path", cell: (x) => h("code", null, x.path) },
          { label: "Title", cell: (x) => x.title || "" },
          { label: "Tools", cell: (x) => String(x.tool_count) },
          { label: "Scopes", cell: (x) => (x.scopes.length ? x.scopes.join(" ") : h("span", { class: "muted" }, "none")) },
          { label: "Defined in", cell: (x) => badge(x.origin === "settings" ? "settings" : `admin API (rev ${x.revision})`, x.origin === "settings" ? "neutral" : "good") },
          { label: "", cell: (x) => (x.collisions.length ? badge(`${x.collisions.length} left out`, "warn") : null) },
          { label: "", cell: (x) => [show(x), x.origin === "admin" ? [edit(x), remove(x)] : null] },
        ],
        list.servers,
        { empty: "No virtual servers: define [servers.<name>] in the settings, or add one here.", rowAttrs: (x) => ({ "data-server": x.name }) },
      ),
      detail ? serverDetail(detail) : null,
    );
  };
  await draw();
  ctx.every(15000, () => (editing ? Promise.resolve() : draw()));
}

function serverDetail(d) {
  return h(
    "section",
    { class: "card", "data-detail": d.name },
    h("h2", null, `${d.name}: ${d.path}`),
    d.resource ? h("p", { class: "muted" }, "Tokens for it carry the audience ", h("code", null, d.resource)) : null,
    d.collisions.length ? h("div", { class: "card problem" }, h("strong", null, "Left out"), h("ul", null, d.collisions.map((c) => h("li", null, c)))) : null,
    table(
      [
        { label: "Served as", cell: (t) => h("code", null, t.name) },
        { label: "Tool at the default endpoint", cell: (t) => h("code", null, t.served_from) },
        { label: "Source", cell: (t) => t.source },
        { label: "Description", cell: (t) => t.description },
      ],
      d.tools,
      { empty: "It serves no tool now." },
    ),
    h("details", null, h("summary", null, "Definition"), json(d.definition)),
  );
}
