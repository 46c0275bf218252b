// Drives the admin console in Chromium (Debian's, through playwright-core) against a running
// toolgate, as an operator would: token, tools, enable/disable, reload, a tool try-out (its
// progress live, and a call cancelled), the audit log with a filter and a CSV export, a running
// task cancelled in the Tasks view, sessions, virtual servers (a refused and a stored
// definition, its served tools, deleting it), upstreams and an upstream's page, overview and a
// tool's page with their charts; with the vault on, users' connections (filtered, one
// disconnected). Screenshots of every
// view go to SHOTS. Any error in the page's console (or an uncaught exception) fails the run,
// except the refusals a step provokes on purpose (a bad token's 401/403).
//
// Run by tests/console_check.sh, which starts the server and passes:
//   PLAYWRIGHT_DIR  the directory holding node_modules/playwright-core
//   CHROMIUM        the browser binary (/usr/bin/chromium)
//   ADMIN           the admin listener's base URL (http://127.0.0.1:PORT)
//   MCP             the MCP endpoint (for a live session to list)
//   MODE            "token" (auth on: ADMIN_TOKEN, MCP_ONLY_TOKEN), "off", or "vault" (ADMIN_TOKEN)
//   SHOTS           where screenshots and the exported file go
// Prints `PASS <check>` / `FAIL <check>: <why>` lines; exits 1 on any failure.

import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(join(process.env.PLAYWRIGHT_DIR, "noop.js"));
const { chromium } = require("playwright-core");

const { ADMIN, MCP, MODE, SHOTS } = process.env;
const ADMIN_TOKEN = process.env.ADMIN_TOKEN || "";
const MCP_ONLY_TOKEN = process.env.MCP_ONLY_TOKEN || "";
const STEP_TIMEOUT = 15000;

let failures = 0;
let step = "start";
/// Console errors and page exceptions, with the step they happened in.
const pageErrors = [];
/// The refusals steps provoke on purpose, which the browser logs as console errors ("Failed
/// to load resource: the server responded with a status of 401"): step → status.
const expectedRefusals = new Map([
  ["login with a bad token", 401],
  ["login with a token lacking the admin scope", 403],
  ["audit: a bad filter says what to change", 400],
  ["servers: the settings' server, and a new one through the form", 422],
]);

function pass(name) {
  console.log(`PASS ${name}`);
}
function fail(name, why) {
  failures += 1;
  console.log(`FAIL ${name}: ${String(why).split("\n")[0]}`);
}

/// Runs one named check; an exception fails it. The checks build on each other, so after a
/// failure the rest are skipped (each would only wait for its timeout).
async function check(name, fn) {
  if (failures) {
    console.log(`skipped: ${name}`);
    return;
  }
  step = name;
  try {
    await fn();
    pass(name);
  } catch (error) {
    fail(name, error && error.message ? error.message : error);
  }
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

/// The admin API directly (to set up, and to confirm what the console did).
async function api(method, path, body) {
  const headers = { accept: "application/json" };
  if (ADMIN_TOKEN) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(ADMIN + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

/// A legacy session (so the Sessions view has one to list) with its GET stream held open.
async function openSession() {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (process.env.MCP_TOKEN) headers.authorization = `Bearer ${process.env.MCP_TOKEN}`;
  const init = { jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "console-check", version: "1.0" } } };
  const res = await fetch(MCP, { method: "POST", headers, body: JSON.stringify(init) });
  assert(res.ok, `initialize: HTTP ${res.status}`);
  await res.text();
  const sid = res.headers.get("mcp-session-id");
  await fetch(MCP, { method: "POST", headers: { ...headers, "mcp-session-id": sid }, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
  const controller = new AbortController();
  const stream = await fetch(MCP, { headers: { ...headers, accept: "text/event-stream", "mcp-session-id": sid }, signal: controller.signal });
  assert(stream.ok, `GET stream: HTTP ${stream.status}`);
  // Keep reading so the stream stays live; stop when aborted.
  const reader = stream.body.getReader();
  (async () => {
    try {
      while (!(await reader.read()).done);
    } catch {
      // aborted
    }
  })();
  return { sid, close: () => controller.abort() };
}

/// A 2026-07-28 request to the MCP endpoint (with MCP_TOKEN), opted into tasks; its JSON answer.
async function mcp(method, params) {
  const headers = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", "mcp-method": method };
  if (params.name || params.taskId) headers["mcp-name"] = params.name || params.taskId;
  if (process.env.MCP_TOKEN) headers.authorization = `Bearer ${process.env.MCP_TOKEN}`;
  const meta = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": { name: "console-check", version: "1.0" },
    "io.modelcontextprotocol/clientCapabilities": { extensions: { "io.modelcontextprotocol/tasks": {} } },
  };
  const res = await fetch(MCP, { method: "POST", headers, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params: { ...params, _meta: meta } }) });
  assert((res.headers.get("content-type") || "").startsWith("application/json"), `${method}: HTTP ${res.status} ${res.headers.get("content-type")}`);
  return res.json();
}

/// Runs `tool` as a task (the server decides so for a client that opted in); its id.
async function createTask(tool, args) {
  const created = await mcp("tools/call", { name: tool, arguments: args });
  assert(created.result && created.result.resultType === "task", `a task: ${JSON.stringify(created)}`);
  return created.result.taskId;
}

async function shot(page, name) {
  // From the top: a full-page capture of a scrolled page draws the sticky bar mid-page.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: join(SHOTS, `${MODE}-${name}.png`), fullPage: true });
}

async function nav(page, view) {
  await page.click(`#nav a[data-view="${view}"]`);
  await page.waitForSelector(`#view[data-view="${view}"] .view-head h1`, { timeout: STEP_TIMEOUT });
}

/// The charts of `scope` hold lines with points: calls (with errors) and latency, each with a
/// summary for screen readers and tooltips whose times carry their zone.
async function chartsDrawn(page, scope) {
  const panel = `section.charts[data-scope="${scope}"]`;
  await page.waitForSelector(`${panel} .s-calls path.line`);
  const drawn = await page.$$eval(`${panel} svg.chart-svg`, (charts) =>
    charts.map((svg) => ({
      label: svg.getAttribute("aria-label"),
      points: [...svg.querySelectorAll("path.line")].map((p) => Number(p.getAttribute("data-points"))),
      tips: [...svg.querySelectorAll("rect.hover title")].map((t) => t.textContent),
    })),
  );
  assert(drawn.length === 2, `two charts: ${drawn.length}`);
  for (const chart of drawn) {
    assert(chart.points.length >= 1 && chart.points.every((n) => n >= 1), `lines with points: ${JSON.stringify(chart)}`);
    assert(/call/.test(chart.label) || /p95/.test(chart.label), `a summary: ${chart.label}`);
    assert(chart.tips.some((t) => / UTC/.test(t) && /\d+ calls?/.test(t)), `tooltips with times and their zone: ${chart.tips.slice(-1)}`);
  }
  assert(/calls\/s/.test(await page.textContent(`${panel} .legend`)), "a legend");
}

async function main() {
  const started = Date.now();
  const profile = mkdtempSync(join(tmpdir(), "toolgate-console-profile-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM,
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1360, height: 860 },
    acceptDownloads: true,
    timezoneId: "UTC",
    locale: "en-GB",
  });
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(STEP_TIMEOUT);
  page.on("console", (msg) => {
    if (msg.type() === "error") pageErrors.push({ step, text: msg.text() });
  });
  page.on("pageerror", (error) => pageErrors.push({ step, text: `uncaught: ${error.message}` }));
  let session = null;

  try {
    if (MODE === "token") await tokenRun(page, (s) => (session = s));
    else if (MODE === "vault") await vaultRun(page);
    else await openRun(page);
  } finally {
    if (session) session.close();
    await context.close();
    rmSync(profile, { recursive: true, force: true });
  }

  const unexpected = pageErrors.filter((e) => !(expectedRefusals.has(e.step) && e.text.includes(`status of ${expectedRefusals.get(e.step)} `)));
  step = "page console";
  if (unexpected.length) {
    for (const e of unexpected) console.log(`  console error in "${e.step}": ${e.text}`);
    fail("no errors in the page's console", `${unexpected.length} error(s)`);
  } else {
    pass(`no errors in the page's console (${pageErrors.length} expected refusal(s) logged)`);
  }
  console.log(`browser run (${MODE}): ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

/// Auth on: the full walk through every view.
async function tokenRun(page, keepSession) {
  await check("set up: a stored tool, a live session", async () => {
    const created = await api("POST", "/admin/tools", { name: "say", description: 'Repeat the given text. Example: {"text": "hi"} returns "hi".', builtin: { id: "echo" } });
    assert(created.status === 201 || created.status === 409, `POST /admin/tools: ${created.status}`);
    keepSession(await openSession());
  });

  await check("the page asks for a token", async () => {
    await page.goto(`${ADMIN}/admin/console`);
    await page.waitForSelector("#login:not([hidden])");
    assert(await page.isVisible("#login-dev-hint"), "the dev-mode hint is shown");
    await shot(page, "01-login");
  });

  await check("login with a bad token", async () => {
    await page.fill("#token", "not.a.token");
    await page.click("#login-form button[type=submit]");
    await page.waitForSelector("#login-reason:not([hidden])");
    const reason = await page.textContent("#login-reason");
    assert(/not valid/.test(reason), `the refusal's detail is shown: ${reason}`);
  });

  await check("login with a token lacking the admin scope", async () => {
    await page.fill("#token", MCP_ONLY_TOKEN);
    await page.click("#login-form button[type=submit]");
    await page.waitForFunction(() => /toolgate:admin/.test(document.querySelector("#login-reason").textContent));
    await shot(page, "02-login-refused");
  });

  await check("login with the admin token shows the overview", async () => {
    await page.fill("#token", ADMIN_TOKEN);
    await page.click("#login-form button[type=submit]");
    await page.waitForSelector('#view[data-view="overview"] .stat');
    const who = await page.textContent("#who");
    assert(who.includes("console-e2e"), `the token's subject is shown: ${who}`);
    const stored = await page.evaluate(() => ({ session: sessionStorage.getItem("toolgate-admin-token") !== null, local: localStorage.length }));
    assert(stored.session && stored.local === 0, `kept in sessionStorage only: ${JSON.stringify(stored)}`);
  });

  await check("tools: every tool with its origin, and the sources", async () => {
    await nav(page, "tools");
    await page.waitForSelector('tr[data-tool="say"]');
    await page.waitForSelector('tr[data-tool="echo"]');
    await page.waitForSelector('tr[data-tool="from_file"]');
    const sources = await page.textContent("#sources");
    assert(sources.includes("tools file") && sources.includes("database") && sources.includes("upstream dead"), sources);
    await shot(page, "03-tools");
  });

  await check("tools: disable and enable a stored tool", async () => {
    await page.click('tr[data-tool="say"] button[data-action="disable"]');
    await page.waitForSelector('tr[data-tool="say"] button[data-action="enable"]');
    const off = await api("GET", "/admin/tools/say");
    assert(off.body.enabled === false, `the API shows it disabled: ${JSON.stringify(off.body)}`);
    const catalog = await api("GET", "/admin/catalog");
    assert(!catalog.body.tools.some((t) => t.name === "say"), "no longer served");
    await shot(page, "04-tools-disabled");
    await page.click('tr[data-tool="say"] button[data-action="enable"]');
    await page.waitForSelector('tr[data-tool="say"] button[data-action="disable"]');
    const on = await api("GET", "/admin/tools/say");
    assert(on.body.enabled === true && on.body.revision >= 3, `the API shows it enabled again: ${JSON.stringify(on.body)}`);
  });

  await check("tools: reload the sources", async () => {
    await page.click("#reload");
    await page.waitForSelector('.banner.ok:has-text("Reloaded")');
    const text = await page.textContent(".banner.ok");
    assert(/Tools file: \+0 ~0 −0; database: \+0 ~0 −0/.test(text), text);
  });

  await check("try a tool: a form from its schema, and its result", async () => {
    await page.click('tr[data-tool="echo"] a.button-link');
    await page.waitForSelector('#try-form[data-tool="echo"]');
    assert((await page.inputValue("#try-tool")) === "echo", "the tool picked in the list is selected");
    assert((await page.textContent('label[for="arg-0"]')).includes("*"), "text is marked required");
    await page.click("#try-call");
    await page.waitForSelector("#try-result .problem");
    assert((await page.textContent("#try-result")).includes("text is required"), "a missing required field is caught");
    await page.fill("#arg-0", "hello from the console");
    await page.click("#try-call");
    await page.waitForSelector('#try-result [data-is-error="false"]');
    const out = await page.textContent("#try-result");
    assert(out.includes("hello from the console"), out);
    await shot(page, "05-try-echo");
  });

  await check("try a tool: numbers, structured content and progress", async () => {
    await page.selectOption("#try-tool", "calculate_sum");
    await page.waitForSelector('#try-form[data-tool="calculate_sum"]');
    await page.fill("#arg-0", "2.5");
    await page.fill("#arg-1", "4");
    await page.click("#try-call");
    await page.waitForSelector('#try-result [data-is-error="false"]');
    assert((await page.textContent("#try-result")).includes("6.5"), "the sum");
    await shot(page, "06-try-sum");
    await page.selectOption("#try-tool", "report_progress_steps");
    await page.waitForSelector('#try-form[data-tool="report_progress_steps"]');
    await page.fill("#arg-0", "3");
    await page.fill("#arg-1", "20");
    await page.click("#try-call");
    await page.waitForSelector('#try-result [data-is-error="false"]');
    const reported = await page.textContent("#try-progress-summary");
    assert(/^(\d+) of \1: Step \1 of \1/.test(reported), `the last progress as a bar with its message: ${reported}`);
    assert(!(await page.textContent("#try-result")).includes("notifications/progress"), "no raw JSON of the notifications");
  });

  await check("try a tool: a long call's progress live, then its result", async () => {
    await page.selectOption("#try-tool", "countdown");
    await page.waitForSelector('#try-form[data-tool="countdown"]');
    await page.fill("#arg-0", "3");
    await page.click("#try-call");
    await page.waitForSelector("#try-cancel:not([hidden])");
    await page.waitForFunction(() => /^1 of 3: 2 s left$/.test(document.querySelector("#try-progress-text")?.textContent || ""));
    assert((await page.getAttribute("#try-progress", "max")) === "3", "a bar of 3 steps");
    await shot(page, "06b-try-progress");
    await page.waitForSelector('#try-result [data-is-error="false"]');
    assert((await page.textContent("#try-result")).includes("Countdown of 3 s done"), "the result after the progress");
    assert(await page.isHidden("#try-cancel"), "no Cancel once the call answered");
  });

  await check("try a tool: Cancel stops a running call on the server", async () => {
    await page.fill("#arg-0", "60");
    await page.click("#try-call");
    await page.waitForFunction(() => /^1 of 60/.test(document.querySelector("#try-progress-text")?.textContent || ""));
    await page.click("#try-cancel");
    await page.waitForSelector("#try-cancelled");
    let cancelled = [];
    for (let i = 0; i < 100 && !cancelled.length; i++) {
      cancelled = (await api("GET", "/admin/audit?tool=countdown&kind=tool_call&outcome=cancelled")).body.records;
      if (!cancelled.length) await new Promise((r) => setTimeout(r, 100));
    }
    assert(cancelled.length === 1, `the call was recorded cancelled: ${JSON.stringify(cancelled)}`);
    await shot(page, "06c-try-cancelled");
  });

  await check("audit: filter finds the try-out", async () => {
    await nav(page, "audit");
    await page.fill("#audit-tool", "echo");
    await page.selectOption("#audit-kind", "tool_call");
    await page.click("#audit-search");
    await page.waitForSelector('#audit-results tr[data-tool="echo"]');
    const rows = await page.$$eval("#audit-results tbody tr[data-kind]", (trs) => trs.map((tr) => tr.textContent));
    assert(rows.length >= 1 && rows.every((r) => r.includes("echo")), `only echo: ${rows.length} rows`);
    assert(rows.some((r) => r.includes("console-e2e")), "the call is recorded under the admin token's subject");
    await shot(page, "07-audit");
  });

  await check("audit: times carry their zone, and a record opens in a full-width row", async () => {
    const time = await page.textContent('#audit-results tr[data-tool="echo"] td');
    assert(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(time.trim()), `a time with its zone: ${time}`);
    await page.click('#audit-results tr[data-tool="echo"] button.expander');
    const opened = await page.waitForSelector("#audit-results tr.expanded:not([hidden]) td[colspan]");
    const columns = await page.$$eval("#audit-results thead th", (ths) => ths.length);
    assert((await opened.getAttribute("colspan")) === String(columns), `spans all ${columns} columns`);
    assert((await opened.textContent()).includes('"tool": "echo"'), "the whole record");
    await shot(page, "07b-audit-record");
  });

  await check("audit: a bad filter says what to change", async () => {
    await page.fill("#audit-limit", "5000");
    await page.click("#audit-search");
    await page.waitForSelector(".banner.error");
    assert((await page.textContent(".banner.error")).includes("1 to 1000"), "names the accepted range");
    await page.fill("#audit-limit", "100");
  });

  await check("audit: export CSV", async () => {
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export-csv")]);
    const name = download.suggestedFilename();
    assert(/^toolgate-audit-\d{8}T\d{6}Z\.csv$/.test(name), name);
    const path = join(SHOTS, `${MODE}-audit-export.csv`);
    await download.saveAs(path);
    const lines = readFileSync(path, "utf8").trim().split("\n");
    assert(lines[0].startsWith("id,time,request_id"), lines[0]);
    assert(lines.length >= 2 && lines.slice(1).every((l) => l.includes(",echo,")), `${lines.length - 1} echo rows`);
  });

  await check("sessions: the live session and its stream", async () => {
    await nav(page, "sessions");
    await page.waitForSelector("#view table");
    const text = await page.textContent("#view");
    assert(text.includes("console-check 1.0"), "the client's name and version");
    assert(text.includes("console-e2e"), "the subject");
    await shot(page, "08-sessions");
  });

  await check("tasks: a running task with its owner, filtered, cancelled through the button", async () => {
    const id = await createTask("countdown", { seconds: 60 });
    await nav(page, "tasks");
    const row = `tr[data-task="${id}"]`;
    await page.waitForSelector(`${row}[data-status="working"]`);
    const text = await page.textContent(row);
    assert(text.includes("countdown") && text.includes("console-e2e") && text.includes("1 h"), `tool, owner and TTL: ${text}`);
    await page.selectOption("#task-status", "completed");
    await page.waitForSelector(row, { state: "detached" });
    await page.selectOption("#task-status", "working");
    await page.fill("#task-tool", "countdown");
    await page.click("#task-search");
    await page.waitForSelector(`${row}[data-status="working"]`);
    await shot(page, "08a-tasks");
    page.once("dialog", (d) => d.accept());
    await page.click(`button[data-cancel="${id}"]`);
    await page.waitForSelector('.banner.ok:has-text("Cancelled task")');
    await page.selectOption("#task-status", "");
    await page.waitForSelector(`${row}[data-status="cancelled"]`);
    assert((await page.textContent(row)).includes("cancelled by an operator"), "the status message");
    const seen = await mcp("tasks/get", { taskId: id });
    assert(seen.result && seen.result.status === "cancelled", `the owner sees it cancelled: ${JSON.stringify(seen)}`);
    await page.fill("#task-tool", "");
  });

  await check("servers: the settings' server, and a new one through the form", async () => {
    await nav(page, "servers");
    await page.waitForSelector('tr[data-server="docs"]');
    assert((await page.textContent('tr[data-server="docs"]')).includes("settings"), "the settings' server is read-only");
    await page.click("#new-server");
    await page.fill('input[name="server-name"]', "team");
    await page.fill('textarea[name="server-definition"]', JSON.stringify({ path: "/mcp", tools: ["echo"] }));
    await page.click('form.editor button[type="submit"]');
    await page.waitForSelector('form.editor .problem[data-status="422"]');
    assert((await page.textContent("form.editor .problem")).includes("server.mcp_path"), "the refusal names the setting it collides with");
    await page.fill('textarea[name="server-definition"]', JSON.stringify({ path: "/teams/team/mcp", tools: ["echo"], overrides: { echo: { name: "say", description: "Say it back" } } }));
    await page.click('form.editor button[type="submit"]');
    await page.waitForSelector('tr[data-server="team"]');
    await page.click('button[data-show="team"]');
    await page.waitForSelector('[data-detail="team"] table');
    const detail = await page.textContent('[data-detail="team"]');
    assert(detail.includes("say") && detail.includes("echo") && detail.includes("Say it back"), detail.slice(0, 300));
    await shot(page, "08b-servers");
  });

  await check("servers: delete the one defined here", async () => {
    page.once("dialog", (d) => d.accept());
    await page.click('button[data-delete="team"]');
    await page.waitForSelector('tr[data-server="team"]', { state: "detached" });
  });

  await check("sign-ins: says when the authorization server is off", async () => {
    await nav(page, "grants");
    const text = await page.textContent("#view");
    assert(text.includes("authorization server is off"), text);
  });

  await check("connections: says when the vault is off", async () => {
    await nav(page, "connections");
    const text = await page.textContent("#view");
    assert(text.includes("The vault is off") && text.includes("[vault] keys"), text);
    await shot(page, "09a-connections-off");
  });

  await check("upstreams: state and last error", async () => {
    await nav(page, "upstreams");
    await page.waitForSelector("#view table");
    const text = await page.textContent("#view");
    assert(text.includes("dead") && /connect|refused|error/i.test(text), "the unreachable upstream with its error");
    await shot(page, "09-upstreams");
  });

  await check("approvals: a rug pull is held with its diff and approved through the button", async () => {
    // The upstream fx changes its echo after the first listing, which was pinned.
    const pulled = await api("POST", "/admin/tools/fx_rug_pull/call", { arguments: {} });
    assert(pulled.status === 200, `rug_pull: ${JSON.stringify(pulled.body)}`);
    let held = [];
    for (let i = 0; i < 100 && !held.length; i++) {
      held = (await api("GET", "/admin/approvals?source=fx")).body.approvals;
      if (!held.length) await new Promise((r) => setTimeout(r, 100));
    }
    assert(held.length === 1 && held[0].name === "echo", `held: ${JSON.stringify(held)}`);
    const served = await api("GET", "/admin/catalog");
    const echo = served.body.tools.find((t) => t.name === "fx_echo");
    assert(echo && !echo.listing.description.includes("id_rsa"), "the approved version serves meanwhile");
    await nav(page, "upstreams");
    await page.waitForSelector('#view a[href="#approvals"]');
    assert((await page.textContent("#view")).includes("1 waiting"), "the Upstreams view shows the held change");
    await nav(page, "approvals");
    await page.waitForSelector(`section.approval[data-id="${held[0].id}"] .diff-after`);
    const text = await page.textContent("#view");
    assert(text.includes("id_rsa") && text.includes("/properties/secret"), "the diff shows the new description and the schema's new path");
    await shot(page, "11-approvals");
    await page.click(`button[data-approval="${held[0].id}"][data-verb="approve"]`);
    await page.waitForSelector("#view p.empty");
    const approved = await api("GET", "/admin/approvals?state=approved&source=fx");
    assert(approved.body.approvals.some((a) => a.id === held[0].id), "approved through the button");
  });

  await check("upstreams: a page with the last error kept after a reconnect, the history and the skipped tools", async () => {
    // fx dies and is reconnected: its page keeps the error, with its time.
    await api("POST", "/admin/tools/fx_die/call", { arguments: {} });
    let fx = null;
    for (let i = 0; i < 100 && !(fx && fx.state === "connected" && fx.reconnects >= 1); i++) {
      fx = (await api("GET", "/admin/upstreams/fx")).body.status;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert(fx.state === "connected" && fx.last_error, `reconnected with its last error: ${JSON.stringify(fx)}`);
    await nav(page, "upstreams");
    await page.click('#view a.upstream-link[href="#upstreams/fx"]');
    await page.waitForSelector('#upstream-detail[data-upstream="fx"] #upstream-last-error .last-error.past');
    const error = await page.textContent("#upstream-last-error");
    assert(/at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC/.test(error) && error.includes("connected again"), error);
    assert(await page.isVisible('#upstream-history tr[data-to="disconnected"]'), "the history shows the loss");
    assert(await page.isVisible('#upstream-history tr[data-to="connected"]'), "and the reconnection");
    const skipped = await page.textContent('#upstream-tools tr[data-skipped="invalid"]');
    assert(skipped.includes("bad name"), `the invalid tool with its reason: ${skipped}`);
    assert(await page.isVisible('#upstream-served a[href="#tools/fx_echo"]'), "served tools link to their page");
    assert((await page.textContent("#upstream-settings")).includes("<redacted>"), "the program's environment values are redacted");
    await page.waitForSelector('section.charts[data-scope="upstream"] path.line');
    await shot(page, "09b-upstream-fx");
  });

  await check("upstreams: an upstream that never connected shows why", async () => {
    await page.goto(`${ADMIN}/admin/console#upstreams/dead`);
    await page.waitForSelector('#upstream-detail[data-upstream="dead"] #upstream-last-error .last-error:not(.past)');
    assert(await page.isVisible('#upstream-history tr[data-to="disconnected"]'), "the failed attempts");
    await page.waitForSelector('section.charts[data-scope="upstream"] .chart-empty');
    await shot(page, "09c-upstream-dead");
  });

  await check("overview: figures after the walk", async () => {
    await nav(page, "overview");
    await page.waitForSelector('#view[data-view="overview"] .stat');
    const text = await page.textContent("#view");
    assert(/Tool calls/.test(text) && /Audit log/.test(text), text.slice(0, 200));
    await shot(page, "10-overview");
  });

  await check("overview: charts of calls, errors and latency with data in them", async () => {
    await chartsDrawn(page, "all");
    await page.click('section.charts button[data-window="start"]');
    await page.waitForSelector('section.charts button[data-window="start"][aria-pressed="true"]');
    await chartsDrawn(page, "all");
    await shot(page, "10b-overview-charts");
    await page.click('section.charts button[data-window="hour"]');
  });

  await check("tools: a tool's page with its charts", async () => {
    await nav(page, "tools");
    await page.click('tr[data-tool="echo"] a.tool-link');
    await page.waitForSelector('#tool-about[data-tool="echo"]');
    await chartsDrawn(page, "tool");
    await shot(page, "10c-tool-echo");
  });

  await check("forget the token", async () => {
    await page.click("#sign-out");
    await page.waitForSelector("#login:not([hidden])");
    assert((await page.evaluate(() => sessionStorage.getItem("toolgate-admin-token"))) === null, "gone from sessionStorage");
  });
}

/// The vault on: users' connections listed, filtered and disconnected.
async function vaultRun(page) {
  const alice = "0190c0de-0000-7000-8000-00000000a11c";
  const bob = "0190c0de-0000-7000-8000-0000000000b0";
  const aliceTickets = "0190c0de-0000-7000-8000-0000000a11c2";

  await check("vault: login with the operator's token", async () => {
    await page.goto(`${ADMIN}/admin/console`);
    await page.waitForSelector("#login:not([hidden])");
    await page.fill("#token", ADMIN_TOKEN);
    await page.click("#login-form button[type=submit]");
    await page.waitForSelector('#view[data-view="overview"] .stat');
  });

  await check("connections: every user's, newest first, never a token", async () => {
    await nav(page, "connections");
    await page.waitForSelector(`tr[data-connection-row="${aliceTickets}"]`);
    const ids = await page.$$eval("tr[data-connection-row]", (rows) => rows.map((r) => r.getAttribute("data-connection-row")));
    assert(JSON.stringify(ids) === JSON.stringify([aliceTickets, alice, bob]), `newest first: ${ids}`);
    const text = await page.textContent("#view");
    assert(text.includes("tickets:read") && text.includes("alice") && text.includes("bob"), text.slice(0, 300));
    assert(!text.includes("not-a-sealed-record"), "the sealed record is never shown");
    await shot(page, "12-connections");
  });

  await check("connections: filtered by user, then by upstream", async () => {
    await page.fill('input[name="user"]', "alice");
    await page.click('form.filters button[type="submit"]');
    await page.waitForSelector(`tr[data-connection-row="${bob}"]`, { state: "detached" });
    assert((await page.$$("tr[data-connection-row]")).length === 2, "alice's two");
    await page.fill('input[name="upstream"]', "notes");
    await page.click('form.filters button[type="submit"]');
    await page.waitForSelector(`tr[data-connection-row="${aliceTickets}"]`, { state: "detached" });
    assert((await page.$$("tr[data-connection-row]")).length === 1, "alice's at notes only");
  });

  await check("connections: disconnect through the button", async () => {
    page.once("dialog", (d) => d.accept());
    await page.click(`button[data-connection="${alice}"]`);
    await page.waitForSelector("#view p.empty");
    assert((await page.textContent("#view p.empty")).includes("No connections match"), "none left for the filter");
    const left = await api("GET", "/admin/connections");
    assert(left.status === 200 && left.body.enabled === true, `GET: ${JSON.stringify(left.body)}`);
    const ids = left.body.connections.map((c) => c.id);
    assert(!ids.includes(alice) && ids.includes(bob) && ids.includes(aliceTickets), `left: ${ids}`);
    const again = await api("DELETE", `/admin/connections/${alice}`);
    assert(again.status === 404, `a second DELETE: ${again.status}`);
    await page.fill('input[name="user"]', "");
    await page.fill('input[name="upstream"]', "");
    await page.click('form.filters button[type="submit"]');
    await page.waitForSelector(`tr[data-connection-row="${bob}"]`);
    await shot(page, "13-connections-after");
  });
}

/// Auth off: no token asked, the views load.
async function openRun(page) {
  await check("auth off: no token is asked", async () => {
    await page.goto(`${ADMIN}/admin/console`);
    await page.waitForSelector('#view[data-view="overview"] .stat');
    assert(await page.isHidden("#login"), "no login");
    assert((await page.textContent("#who")).includes("auth off"), "says auth is off");
    await shot(page, "01-overview");
  });
  await check("auth off: tools and a try-out", async () => {
    await nav(page, "tools");
    await page.waitForSelector('tr[data-tool="echo"]');
    await shot(page, "02-tools");
    await page.goto(`${ADMIN}/admin/console#try/get_current_time`);
    await page.waitForSelector('#try-form[data-tool="get_current_time"] select#arg-0');
    await page.selectOption("#arg-0", { label: "unix" });
    await page.click("#try-call");
    await page.waitForSelector('#try-result [data-is-error="false"]');
    const out = await page.textContent("#try-result pre.text-content");
    assert(/^\d{10}$/.test(out.trim()), `a unix time: ${out}`);
    await shot(page, "03-try-enum");
  });
  await check("auth off: the audit log", async () => {
    await nav(page, "audit");
    await page.waitForSelector('#audit-results tr[data-tool="get_current_time"]');
  });
}

main()
  .catch((error) => fail(`${step} (unhandled)`, error && error.stack ? error.stack : error))
  .finally(() => process.exit(failures ? 1 : 0));
