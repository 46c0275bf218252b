// The "Try a tool" view: a form built from the tool's input schema, and the call made with the
// operator's token as an MCP tools/call (scopes, rate limits and the audit log apply). The
// answer is streamed: the tool's progress shows as a bar with its message while it runs, and
// Cancel (or leaving the view) closes the stream, which cancels the call on the server.

import * as api from "./api.js";
import { badge, h, heading, json, problemCard, replace } from "./dom.js";
import { schemaForm } from "./form.js";

export async function tryTool(root, ctx, selected) {
  const catalog = await api.get("/admin/catalog");
  if (!ctx.current()) return;
  const tools = catalog.tools.slice().sort((a, b) => a.name.localeCompare(b.name));
  if (!tools.length) {
    replace(root, heading("Try a tool"), h("p", { class: "empty" }, "No tools are served."));
    return;
  }
  const tool = tools.find((t) => t.name === selected) || tools[0];
  const picker = h("select", { id: "try-tool", "aria-label": "Tool" }, tools.map((t) => h("option", { value: t.name }, t.name)));
  picker.value = tool.name;
  picker.addEventListener("change", () => (location.hash = `#try/${encodeURIComponent(picker.value)}`));

  const listing = tool.listing || {};
  const form = schemaForm(listing.inputSchema || {});
  const result = h("div", { id: "try-result" });
  const call = h("button", { type: "submit", id: "try-call" }, "Call");
  const cancel = h("button", { type: "button", id: "try-cancel", class: "secondary", hidden: true }, "Cancel");
  const el = h(
    "form",
    { class: "card", id: "try-form", "data-tool": tool.name },
    h("div", { class: "try-head" }, h("label", { for: "try-tool" }, "Tool"), picker, badge(tool.origin, "neutral"), tool.provenance ? h("span", { class: "muted small" }, tool.provenance) : null),
    listing.title ? h("h2", null, listing.title) : null,
    h("p", { class: "desc" }, listing.description || ""),
    tool.scopes.length ? h("p", { class: "small" }, "Needs the scopes ", tool.scopes.map((s) => h("code", { class: "scope" }, s)), " on your token.") : null,
    form.element,
    h("div", { class: "form-tools" }, h("span", { class: "muted small" }, "Runs as an MCP tools/call with your token: scopes, rate limits and the audit log apply."), h("span", { class: "spacer" }), cancel, call),
  );
  el.addEventListener("submit", async (event) => {
    event.preventDefault();
    const args = form.read();
    if (args.errors) {
      replace(result, h("div", { class: "card problem" }, h("strong", null, "Check the arguments: "), h("ul", null, args.errors.map((e) => h("li", null, e)))));
      return;
    }
    const controller = new AbortController();
    const stop = () => controller.abort();
    cancel.onclick = stop;
    // Leaving the view (or picking another tool) cancels the call too: nothing runs unseen.
    window.addEventListener("hashchange", stop, { once: true });
    call.disabled = true;
    cancel.hidden = false;
    try {
      await run(ctx, tool.name, args.arguments, controller.signal, result);
    } finally {
      window.removeEventListener("hashchange", stop);
      call.disabled = false;
      cancel.hidden = true;
    }
  });
  replace(root, heading("Try a tool"), el, result);
}

/// Makes the call, drawing its progress into `result` as it comes, then its answer.
async function run(ctx, name, args, signal, result) {
  const live = progressPanel(`Calling ${name}…`);
  replace(result, live.element);
  let outcome = null;
  try {
    const answer = await api.postStream(`/admin/tools/${encodeURIComponent(name)}/call`, { arguments: args }, {
      signal,
      onEvent(event, data) {
        if (event === "progress") live.progress(data);
        else if (event === "notification") live.note(data);
        else if (event === "dropped") live.capped();
        else if (event === "result" || event === "problem") outcome = { event, data };
      },
    });
    // A server that answered with one JSON document instead of a stream.
    if (!outcome && answer) outcome = { event: "result", data: answer };
  } catch (error) {
    if (signal.aborted) {
      if (ctx.current()) replace(result, h("div", { class: "card problem", id: "try-cancelled" }, h("strong", null, "Cancelled: "), "the call was stopped on the server."));
      return;
    }
    if (error instanceof api.ApiError && !error.needsToken) replace(result, problemCard(error));
    else ctx.fail(error);
    return;
  }
  if (!ctx.current()) return;
  if (!outcome) replace(result, h("div", { class: "card problem" }, h("strong", null, "No answer: "), "the stream ended before the call answered (the server may be shutting down)."));
  else if (outcome.event === "problem") replace(result, problemCard(new api.ApiError(outcome.data.status || 500, outcome.data, new Headers())));
  else replace(result, callResult(outcome.data));
}

/// Log lines shown while a call runs, as many as the server sends (it stops at its own cap
/// and says so); a tool that sends more cannot grow the page without bound.
const MAX_LIVE_NOTES = 100;

/// A progress bar with the tool's message, and the log messages it sent, while it runs.
function progressPanel(waiting) {
  const bar = h("progress", { id: "try-progress" });
  const text = h("span", { id: "try-progress-text", class: "muted" }, waiting);
  const log = h("ul", { class: "try-log" });
  const more = h("p", { class: "muted small", id: "try-log-more", hidden: true }, "Later notifications are not shown; the result counts them.");
  return {
    element: h("section", { class: "card", id: "try-running" }, h("div", { class: "try-progress" }, bar, text), log, more),
    progress(p) {
      drawProgress(bar, text, p);
    },
    note(message) {
      if (log.childElementCount < MAX_LIVE_NOTES) log.append(h("li", null, logLine(message)));
      else more.hidden = false;
    },
    capped() {
      more.hidden = false;
    },
  };
}

/// `notifications/progress` params on a bar: a share of `total`, or indeterminate without one.
function drawProgress(bar, text, p) {
  const total = Number(p.total);
  if (Number.isFinite(total) && total > 0) {
    bar.max = total;
    bar.value = Math.min(Number(p.progress) || 0, total);
  } else {
    bar.removeAttribute("value");
  }
  const share = Number.isFinite(total) && total > 0 ? `${p.progress} of ${total}` : String(p.progress);
  text.textContent = p.message ? `${share}: ${p.message}` : share;
  text.className = "";
}

/// A notification as one line of text: a log message's level and data, else its method.
function logLine(message) {
  const params = (message && message.params) || {};
  if (message && message.method === "notifications/message") {
    const data = typeof params.data === "string" ? params.data : JSON.stringify(params.data);
    return `${params.level || "log"}${params.logger ? ` (${params.logger})` : ""}: ${data}`;
  }
  return message && message.method ? message.method : JSON.stringify(message);
}


/// A tool's answer: its content items (text, images, resources), structured content, and what
/// it reported while running (its last progress, its log messages).
function callResult(r) {
  const res = r.result || {};
  const items = Array.isArray(res.content) ? res.content : [];
  const item = (c) => {
    if (c.type === "text") return h("pre", { class: "text-content" }, c.text);
    if (c.type === "image" && typeof c.data === "string" && /^image\/[\w.+-]+$/.test(c.mimeType || "")) return h("img", { class: "image-content", alt: "image result", src: `data:${c.mimeType};base64,${c.data}` });
    return json(c);
  };
  return h(
    "section",
    { class: `card result ${r.is_error ? "is-error" : "is-ok"}`, "data-is-error": String(r.is_error) },
    h("div", { class: "view-head sub" }, h("h2", null, "Result"), h("div", { class: "actions" }, r.is_error ? badge("isError: true", "bad") : badge("ok", "good"), h("span", { class: "muted small" }, `${r.duration_ms} ms`))),
    items.length ? items.map(item) : h("p", { class: "muted" }, res.resultType && res.resultType !== "complete" ? `The call ended as ${res.resultType}: the console cannot answer requests for input.` : "No content."),
    res.structuredContent !== undefined ? [h("h3", null, "Structured content"), json(res.structuredContent)] : null,
    reported(r.notifications || [], r.notifications_dropped || 0),
    h("details", null, h("summary", null, "Raw result"), json(res)),
  );
}

/// What the tool reported on the way: its last progress as a bar, log messages as lines.
function reported(notifications, dropped) {
  if (!notifications.length) return null;
  const progress = notifications.filter((n) => n && n.method === "notifications/progress");
  const others = notifications.filter((n) => !(n && n.method === "notifications/progress"));
  let bar = null;
  if (progress.length) {
    const [el, text] = [h("progress", { class: "try-progress-final" }), h("span", null)];
    drawProgress(el, text, progress[progress.length - 1].params || {});
    bar = h("div", { class: "try-progress", id: "try-progress-summary" }, el, text, h("span", { class: "muted small" }, ` (${progress.length} progress report${progress.length === 1 ? "" : "s"})`));
  }
  return [
    h("h3", null, `Reported while running${dropped ? ` (and ${dropped} more not kept)` : ""}`),
    bar,
    others.length ? h("ul", { class: "try-log" }, others.map((n) => h("li", null, logLine(n)))) : null,
  ];
}
