// Small DOM and formatting helpers. Everything the console shows is built with `h`, which sets
// text with textContent: names, descriptions and audit details come from tools and clients, and
// are never parsed as HTML.

import { fmtTime, fmtTimeOfDay } from "./time.js";

/// `h("div", {class: "x", onclick: fn}, child, "text", [more])`: an element with attributes
/// (`on*` keys become listeners; `false`/null values are left out) and children (strings
/// become text nodes; arrays are flattened; null and false are skipped).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (value === true) {
      el.setAttribute(key, "");
    } else {
      el.setAttribute(key, String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else if (child instanceof Node) el.append(child);
    else el.append(document.createTextNode(String(child)));
  }
}

/// Replaces everything inside `el`.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

/// A table from column definitions `[{label, cell: row => content}]`. With `expand:
/// {label, toggle: row => text, content: row => content}`, a last column holds a button that
/// opens a full-width row below its row (the content is built when first opened).
export function table(columns, rows, { empty = "Nothing to show.", rowAttrs, expand } = {}) {
  if (!rows.length) return h("p", { class: "empty" }, empty);
  const width = columns.length + (expand ? 1 : 0);
  const body = (row) => {
    const tr = h("tr", rowAttrs ? rowAttrs(row) : null, columns.map((c) => h("td", null, c.cell(row))));
    if (!expand) return tr;
    const cell = h("td", { colspan: width });
    const below = h("tr", { class: "expanded", hidden: true }, cell);
    const toggle = h("button", { type: "button", class: "link expander", "aria-expanded": "false" }, expand.toggle(row));
    toggle.addEventListener("click", () => {
      if (!cell.firstChild) replace(cell, expand.content(row));
      below.hidden = !below.hidden;
      toggle.setAttribute("aria-expanded", String(!below.hidden));
    });
    tr.append(h("td", null, toggle));
    return [tr, below];
  };
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      null,
      h("thead", null, h("tr", null, columns.map((c) => h("th", { scope: "col" }, c.label)), expand ? h("th", { scope: "col" }, expand.label) : null)),
      h("tbody", null, rows.map(body)),
    ),
  );
}

/// A coloured label: `kind` is good, bad, warn or neutral.
export function badge(text, kind = "neutral") {
  return h("span", { class: `badge ${kind}` }, text);
}

/// A label and a figure, for the overview's cards.
export function stat(label, value, note) {
  return h("div", { class: "stat" }, h("div", { class: "stat-value" }, value), h("div", { class: "stat-label" }, label), note ? h("div", { class: "stat-note muted" }, note) : null);
}

/// Pretty-printed JSON in a <pre>.
export function json(value) {
  return h("pre", { class: "json" }, JSON.stringify(value, null, 2));
}

/// Every time shown carries its zone: see time.js.
export { fmtTime };

export function fmtMs(ms) {
  if (ms === null || ms === undefined) return "–";
  return fmtTime(new Date(ms));
}

/// "3 s ago", "4 min ago", "2 h ago".
export function ago(iso) {
  if (!iso) return "–";
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 60) return `${Math.max(s, 0)} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} d ago`;
}

/// Seconds as "850 µs", "12.3 ms", "1.20 s".
export function fmtSeconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 0.001) return `${Math.round(s * 1e6)} µs`;
  if (s < 1) return `${(s * 1000).toFixed(1)} ms`;
  return `${s.toFixed(2)} s`;
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return "–";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function fmtCount(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString();
}

// ---- View furniture (shared by the views' files) ----

/// A view's heading with buttons on the right.
export function heading(title, ...actions) {
  return h("div", { class: "view-head" }, h("h1", null, title), h("div", { class: "actions" }, actions));
}

export function button(label, onclick, attrs = {}) {
  return h("button", { type: "button", ...attrs, onclick }, label);
}

/// Runs an action from a button: disabled while it runs, failures to `ctx.fail`.
export function action(ctx, fn) {
  return async (event) => {
    const el = event.currentTarget;
    el.disabled = true;
    try {
      await fn();
    } catch (error) {
      ctx.fail(error);
    } finally {
      el.disabled = false;
    }
  };
}

export function updated() {
  return h("span", { class: "muted updated" }, `updated ${fmtTimeOfDay(new Date())}`);
}

/// An admin API refusal (`api.ApiError`) as a card: its problem document's title and detail,
/// each field error, and when to retry.
export function problemCard(error) {
  const p = error.problem || {};
  const errors = Array.isArray(p.errors) ? p.errors : [];
  return h(
    "div",
    { class: "card problem", "data-status": String(error.status) },
    h("strong", null, `${p.title || "Refused"} (${error.status})`),
    h("p", null, p.detail || error.message),
    errors.length ? h("ul", null, errors.map((e) => h("li", null, h("code", null, e.field), " ", e.message))) : null,
    error.headers.get("retry-after") ? h("p", { class: "small" }, `Retry after ${error.headers.get("retry-after")} s.`) : null,
  );
}
