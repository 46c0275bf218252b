// The "Connections" view: the accounts users connected at per-user upstreams
// (`oauth.grant = "user"`), kept sealed in the vault; never a token. Filtered by user or
// upstream, each one disconnectable: the vault forgets it (and revokes it at the upstream's
// authorization server where that server offers revocation), and the user's next call there
// asks them to connect again.

import * as api from "./api.js";
import { action, ago, button, h, heading, replace, table, updated } from "./dom.js";

/// The filter, kept while the page is open.
const filter = { user: "", upstream: "" };

/// "in 12 min" / "3 min ago": an expiry may be either side of now.
function when(iso) {
  if (!iso) return "–";
  const s = Math.round((new Date(iso).getTime() - Date.now()) / 1000);
  if (s <= 0) return ago(iso);
  if (s < 60) return `in ${s} s`;
  if (s < 3600) return `in ${Math.round(s / 60)} min`;
  if (s < 86400) return `in ${Math.round(s / 3600)} h`;
  return `in ${Math.round(s / 86400)} d`;
}

export async function connections(root, ctx) {
  const draw = async () => {
    const c = await api.get("/admin/connections", { user: filter.user, upstream: filter.upstream });
    if (!ctx.current()) return;
    if (!c.enabled) {
      replace(
        root,
        heading("Connections"),
        h(
          "p",
          { class: "empty" },
          "The vault is off: no upstream runs calls with each user's own account. It needs [vault] keys and the built-in authorization server (authorization_server.enabled); see deploy/auth/per-user-upstreams.md.",
        ),
      );
      return;
    }
    const input = (key, label) =>
      h("label", null, label, h("input", { type: "search", name: key, value: filter[key], oninput: (e) => (filter[key] = e.target.value.trim()) }));
    const form = h(
      "form",
      { class: "card filters", onsubmit: (e) => (e.preventDefault(), draw().catch(ctx.fail)) },
      input("user", "User (subject)"),
      input("upstream", "Upstream"),
      h("button", { type: "submit" }, "Filter"),
    );
    const disconnect = (x) =>
      button(
        "Disconnect",
        action(ctx, async () => {
          if (!window.confirm(`Disconnect ${x.user}'s account at ${x.upstream}? Their next call there asks them to connect again.`)) return;
          await api.request("DELETE", `/admin/connections/${encodeURIComponent(x.id)}`);
          ctx.note(`Disconnected ${x.user}'s account at ${x.upstream}.`);
          await draw();
        }),
        { class: "secondary", "data-connection": x.id },
      );
    replace(
      root,
      heading("Connections", updated(), button("Refresh", action(ctx, draw))),
      h(
        "p",
        { class: "muted" },
        "Users' own accounts at per-user upstreams (oauth.grant = \"user\"), connected in their browser and kept sealed in the vault; tokens are never shown. Newest first.",
      ),
      form,
      table(
        [
          { label: "User", cell: (x) => h("span", { title: x.issuer }, x.user) },
          { label: "Upstream", cell: (x) => h("code", null, x.upstream) },
          { label: "Scopes", cell: (x) => x.scopes || "–" },
          { label: "Connected", cell: (x) => h("span", { title: x.created_at }, ago(x.created_at)) },
          { label: "Updated", cell: (x) => h("span", { title: x.updated_at }, ago(x.updated_at)) },
          { label: "Token expires", cell: (x) => h("span", { title: x.expires_at }, when(x.expires_at)) },
          { label: "Last used", cell: (x) => h("span", { title: x.last_used_at || "" }, ago(x.last_used_at)) },
          { label: "", cell: (x) => disconnect(x) },
        ],
        c.connections,
        { empty: "No connections match.", rowAttrs: (x) => ({ "data-connection-row": x.id }) },
      ),
    );
  };
  await draw();
  ctx.every(15000, draw);
}
