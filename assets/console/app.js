// The console's shell: finds out whether a token is needed (boot.json), asks for one, routes
// between views by the URL's hash (#overview, #tools, #try/<tool>, ...), and shows what went
// wrong. The views themselves are in views.js.

import * as api from "./api.js";
import { h, replace } from "./dom.js";
import { fmtTimeOfDay } from "./time.js";
import { views } from "./views.js";

const $ = (id) => document.getElementById(id);

const state = {
  /// boot.json: {auth: "off" | "dev" | "token", admin_scope}
  boot: null,
  /// Timers of the current view (auto-refresh), cleared when the view changes.
  timers: [],
  /// Bumped on every render, so a slow answer for a view left meanwhile is dropped.
  generation: 0,
};

// ---- messages ---------------------------------------------------------------------------

/// Shows an error (an ApiError's problem document: title, detail, and each field's message)
/// or, with `kind = "ok"`, a short note that goes away by itself.
function banner(content, kind = "error") {
  const el = $("banner");
  el.className = `banner ${kind}`;
  el.hidden = false;
  if (content instanceof Error) {
    const p = content.problem;
    const errors = (p && Array.isArray(p.errors) ? p.errors : []).map((e) => h("li", null, h("code", null, e.field), " ", e.message));
    replace(
      el,
      h("strong", null, p && p.title ? `${p.title}${p.status ? ` (${p.status})` : ""}: ` : "Error: "),
      content.message,
      errors.length ? h("ul", null, errors) : null,
      h("button", { type: "button", class: "link close", "aria-label": "Dismiss", onclick: () => (el.hidden = true) }, "×"),
    );
  } else {
    replace(el, content);
    const shown = el.textContent;
    setTimeout(() => {
      if ($("banner").textContent === shown) $("banner").hidden = true;
    }, 6000);
  }
}

function clearBanner() {
  $("banner").hidden = true;
}

// ---- token ------------------------------------------------------------------------------

/// Asks for a token; `problem` is the refusal that made us ask again (its detail is shown).
function askForToken(problem) {
  $("view").hidden = true;
  $("login").hidden = false;
  $("login-scope").textContent = state.boot.admin_scope;
  $("login-dev-hint").hidden = state.boot.auth !== "dev";
  const reason = $("login-reason");
  reason.hidden = !problem;
  if (problem) reason.textContent = `${problem.title || "Refused"}: ${problem.detail || ""}`;
  showWho();
  $("token").focus();
}

function showWho() {
  const who = $("who");
  const signOut = $("sign-out");
  if (state.boot.auth === "off") {
    who.textContent = "auth off (loopback only)";
    signOut.hidden = true;
    return;
  }
  const t = api.token.get();
  signOut.hidden = !t;
  if (!t) {
    who.textContent = "no token";
    return;
  }
  const d = api.describeToken(t);
  who.textContent = d && d.subject ? `as ${d.subject}${d.expires ? `, until ${fmtTimeOfDay(d.expires)}` : ""}` : "token set";
}

// ---- routing ----------------------------------------------------------------------------

/// The view and its argument from the hash: "#try/echo" → ["try", "echo"].
function route() {
  const [name, ...rest] = decodeURIComponent(location.hash.replace(/^#/, "")).split("/");
  return [views[name] ? name : "overview", rest.join("/")];
}

function stopTimers() {
  state.timers.forEach(clearInterval);
  state.timers = [];
}

/// What a view may use besides the API.
function context(generation) {
  const current = () => generation === state.generation;
  return {
    /// Runs `fn` every `ms` while this view is shown (errors go to `fail`).
    every(ms, fn) {
      const id = setInterval(() => {
        if (!current() || document.hidden) return;
        fn().catch(fail);
      }, ms);
      state.timers.push(id);
    },
    /// Whether this view is still the one shown (answers for a view left are dropped).
    current,
    fail,
    note: (text) => banner(text, "ok"),
    clearBanner,
    serverInfo(server) {
      if (server) $("server-info").textContent = `${server.name} ${server.version}${server.replica ? ` · ${server.replica}` : ""}`;
    },
  };
}

/// A failure of a view or an action: a refused token asks for another, anything else is shown.
function fail(error) {
  if (error instanceof api.ApiError && error.needsToken && state.boot.auth !== "off") {
    api.token.clear();
    stopTimers();
    askForToken(error.problem);
    return;
  }
  console.warn("toolgate console:", error);
  banner(error instanceof Error ? error : new Error(String(error)));
}

async function render() {
  stopTimers();
  const generation = ++state.generation;
  const [name, arg] = route();
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.view === name);
  if (state.boot.auth !== "off" && !api.token.get()) {
    askForToken(null);
    return;
  }
  $("login").hidden = true;
  const root = $("view");
  root.hidden = false;
  root.dataset.view = name;
  replace(root, h("p", { class: "loading muted" }, "Loading…"));
  showWho();
  try {
    await views[name](root, context(generation), arg);
  } catch (error) {
    if (generation === state.generation) fail(error);
  }
}

// ---- start ------------------------------------------------------------------------------

async function start() {
  $("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    api.token.set(value);
    $("token").value = "";
    clearBanner();
    render();
  });
  $("sign-out").addEventListener("click", () => {
    api.token.clear();
    stopTimers();
    replace($("view"));
    askForToken(null);
  });
  window.addEventListener("hashchange", () => {
    clearBanner();
    render();
  });
  try {
    state.boot = await api.boot();
  } catch (error) {
    banner(error instanceof Error ? error : new Error(String(error)));
    return;
  }
  render();
}

start();
