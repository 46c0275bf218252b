// The "Sign-ins" view: the grants of the built-in authorization server (one per user, client
// and resource), filtered by user or client, each revocable. Revoking stops its refresh
// token at once and its access tokens within seconds on every replica.

import * as api from "./api.js";
import { action, ago, badge, button, h, heading, replace, table, updated } from "./dom.js";

/// The filter, kept while the page is open.
const filter = { user: "", client: "", all: false };

const iso = (ms) => (ms ? new Date(ms).toISOString() : null);

function stateBadge(state) {
  return badge(state, state === "active" ? "good" : state === "revoked" ? "bad" : "neutral");
}

export async function grants(root, ctx) {
  const draw = async () => {
    const g = await api.get("/admin/grants", { user: filter.user, client: filter.client, all: filter.all ? "true" : "" });
    if (!ctx.current()) return;
    if (!g.enabled) {
      replace(root, heading("Sign-ins"), h("p", { class: "empty" }, "The built-in authorization server is off (authorization_server.enabled). See deploy/auth/authorization-server.md."));
      return;
    }
    const input = (key, label) =>
      h("label", null, label, h("input", { type: "search", name: key, value: filter[key], oninput: (e) => (filter[key] = e.target.value.trim()) }));
    const form = h(
      "form",
      { class: "card filters", onsubmit: (e) => (e.preventDefault(), draw().catch(ctx.fail)) },
      input("user", "User (subject or email)"),
      input("client", "Client id"),
      h("label", null, h("input", { type: "checkbox", name: "all", checked: filter.all, onchange: (e) => (filter.all = e.target.checked) }), " include revoked and expired"),
      h("button", { type: "submit" }, "Filter"),
    );
    const revoke = (x) =>
      button(
        "Revoke",
        action(ctx, async () => {
          if (!window.confirm(`Revoke ${x.email || x.subject}'s sign-in for ${x.client_id}?`)) return;
          await api.request("DELETE", `/admin/grants/${encodeURIComponent(x.id)}`);
          ctx.note(`Revoked the sign-in of ${x.email || x.subject}.`);
          await draw();
        }),
        { class: "secondary", "data-grant": x.id },
      );
    replace(
      root,
      heading("Sign-ins", updated(), button("Refresh", action(ctx, draw))),
      h("p", { class: "muted" }, `Users signed in through this server's authorization server (issuer ${g.issuer}), per client. Newest first.`),
      form,
      table(
        [
          { label: "User", cell: (x) => h("span", { title: x.subject }, x.email || x.name || x.subject) },
          { label: "Client", cell: (x) => h("code", null, x.client_id) },
          { label: "Scope", cell: (x) => x.scope },
          { label: "State", cell: (x) => h("span", { title: x.revoked_why || "" }, stateBadge(x.state)) },
          { label: "Signed in", cell: (x) => h("span", { title: iso(x.created_ms) }, ago(iso(x.created_ms))) },
          { label: "Last used", cell: (x) => h("span", { title: iso(x.last_used_ms) }, ago(iso(x.last_used_ms))) },
          { label: "", cell: (x) => (x.state === "active" ? revoke(x) : null) },
        ],
        g.grants,
        { empty: "No sign-ins match." },
      ),
    );
  };
  await draw();
  ctx.every(15000, draw);
}
