#!/usr/bin/env node
// The user's browser for tests/e2e/signin.sh, tests/e2e/connect.sh and tests/cluster/signin.sh:
// one headless Chromium (Debian's /usr/bin/chromium, driven by playwright-core from
// $HARNESS_DIR/browser, both installed by tests/e2e/setup.sh), shared by every MCP client of a
// run, each sign-in in a fresh browser context (its own cookies, like a separate user profile)
// unless it names a kept one.
//
//   node tests/e2e/oauth/browser.mjs [--port 0] [--shots DIR]
//
// Listens on 127.0.0.1 (port 0: any free port) and prints one JSON line {"url": "http://127.0.0.1:N",
// "chromium": "<version>", "pid": N} once Chromium runs. Then an MCP client's redirect handler
// (its "open the browser" step) posts here:
//
//   POST /signin {"authorizationUrl": "...", "redirectUri": "...", "login": "alice",
//                 "decision": "approve" | "deny", "label": "ts-dcr", "timeoutMs": 30000}
//
// and the browser plays the user: opens the authorization URL (toolgate's /oauth/authorize), signs
// in at the identity provider (oidc-provider's login form: login and any password; then its consent
// page: Continue), then on toolgate's consent page clicks #approve (or #deny); a second sign-in of
// a client may skip the consent page (remembered). It stops when the browser arrives at
// redirectUri (the client's own loopback listener gets the code from there). The answer is JSON:
//   ok, error            false and why, when the user's path did not end at redirectUri
//   navigations          every top-level request of the tab: method, URL (code and state values
//                        masked), and status when known
//   idpAuthorization     the query parameters of the request to the provider's authorization
//                        endpoint (what toolgate sent it)
//   steps                what the user did: idp-login, idp-consent, consent
//   consent              toolgate's consent page: its visible text and the security headers of
//                        its response (content-security-policy, x-frame-options, cache-control)
//   redirect             the final URL's query parameters (code masked: only whether present)
//   ms                   how long the sign-in took
// With "context": "<name>", the sign-in runs in a browser context kept under that name (created
// on first use, never closed): the user's own profile, whose cookies (the identity provider's
// session) later requests with the same name reuse.
//
//   POST /connect {"url": "<toolgate connect link>", "context": "alice", "idp": "<toolgate's IdP issuer>",
//                  "login": "alice", "upstream": "<upstream AS issuer>", "upstreamLogin": "octo-alice",
//                  "decision": "approve" | "deny", "replay": false, "label": "...", "timeoutMs": 30000}
//
// plays a user opening a connect link of toolgate (tests/e2e/connect.sh): signs in at toolgate's
// identity provider if asked (as `login`; a kept context may pass silently), clicks #approve (or
// #deny) on toolgate's "Connect your account" page, logs in at the upstream's authorization server
// as `upstreamLogin` and consents there, and stops at the first toolgate page with nothing to click
// (the "connected" page, or a refusal). Without "context": a fresh context, closed afterwards. The
// answer: ok (it ended on a toolgate page), final {url, status, title, text} of that page, steps
// (idp-login, idp-consent, connect-page, upstream-login, upstream-consent), navigations,
// connectPage (text, status and security headers of toolgate's connect page), upstreamAuthorization
// (the query toolgate sent the upstream's authorization endpoint; state and code_challenge as their
// length), and, with "replay": true, replay {status, text}: the upstream's redirect to toolgate's
// callback opened once more in the same tab after the connect ended. With "click": "<selector>"
// (any toolgate page, e.g. {issuer}/oauth/connections and "#disconnect-notes"), that button is
// pressed once when it shows: the answer's `before` is the page it was on, and `final` says how
// many such buttons the last page still has (clickable).
// On failure, a screenshot of the page goes to --shots (default: no screenshots).
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    shots: { type: 'string' },
    chromium: { type: 'string', default: '/usr/bin/chromium' },
  },
});
const HARNESS_DIR = process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e');
const require = createRequire(path.join(HARNESS_DIR, 'browser', 'package.json'));
const { chromium } = require('playwright-core');
const log = (...m) => console.error('[browser]', ...m);

const browser = await chromium.launch({
  executablePath: args.chromium,
  headless: true,
  timeout: 30_000,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
if (args.shots) mkdirSync(args.shots, { recursive: true });

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** A URL as logged: the values of code and state replaced by their length. */
function masked(u) {
  try {
    const url = new URL(u);
    for (const k of ['code', 'state']) if (url.searchParams.has(k)) url.searchParams.set(k, `<${url.searchParams.get(k).length}>`);
    return url.href;
  } catch {
    return u;
  }
}

/** Named browser contexts kept between requests (`context` of /signin and /connect): a user's profile. */
const contexts = new Map();
async function contextFor(name) {
  if (!name) return { context: await browser.newContext(), keep: false };
  if (!contexts.has(name)) contexts.set(name, await browser.newContext());
  return { context: contexts.get(name), keep: true };
}

async function signin({ authorizationUrl, redirectUri, login = 'alice', password = 'any password', decision = 'approve', label = 'signin', timeoutMs = 30_000, context: name }) {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const out = { ok: false, label, navigations: [], steps: [], idpAuthorization: null, consent: null, redirect: null };
  const { context, keep } = await contextFor(name);
  const page = await context.newPage();
  page.setDefaultTimeout(Math.min(15_000, timeoutMs));
  const documents = new Map(); // URL without query -> the last document response's headers
  const consoleErrors = []; // CSP violations and other page errors, for the failure message
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text().slice(0, 300)); });
  let authorizeOrigin;
  try {
    authorizeOrigin = new URL(authorizationUrl).origin;
    page.on('request', (req) => {
      if (!req.isNavigationRequest() || req.frame() !== page.mainFrame()) return;
      const entry = { method: req.method(), url: masked(req.url()) };
      out.navigations.push(entry);
      req.response().then((res) => {
        if (!res) return;
        entry.status = res.status();
        const u = new URL(res.url());
        documents.set(`${u.origin}${u.pathname}`, res.headers());
      }).catch(() => {});
      const u = new URL(req.url());
      // The first request to another origin's authorization endpoint is the one to the provider.
      if (!out.idpAuthorization && u.origin !== authorizeOrigin && !req.url().startsWith(redirectUri) && req.method() === 'GET') {
        out.idpAuthorization = { endpoint: `${u.origin}${u.pathname}`, params: Object.fromEntries(u.searchParams) };
      }
    });
    log(`${label}: open ${masked(authorizationUrl)}`);
    await page.goto(authorizationUrl, { waitUntil: 'commit' });
    let idle = 0;
    for (;;) {
      if (Date.now() > deadline) throw new Error(`the sign-in did not reach ${redirectUri} within ${timeoutMs} ms; the tab is at ${masked(page.url())}`);
      if (page.url().startsWith(redirectUri)) {
        await page.waitForLoadState('load').catch(() => {});
        out.redirect = Object.fromEntries(new URL(page.url()).searchParams);
        if (out.redirect.code) out.redirect.code = `<${out.redirect.code.length} characters>`;
        out.ok = true;
        break;
      }
      if (page.url().startsWith('chrome-error://')) {
        const last = out.navigations.at(-1);
        throw new Error(`the browser could not load ${last ? `${last.method} ${last.url}` : 'the page'} (connection refused or reset)`);
      }
      let acted = false;
      try {
        if (await page.locator('input[name=login]').count()) {
          out.steps.push('idp-login');
          await page.fill('input[name=login]', login);
          await page.fill('input[name=password]', password);
          await page.click('button[type=submit]');
          await page.locator('input[name=login]').waitFor({ state: 'detached' });
          acted = true;
        } else if (await page.locator('input[name=prompt][value=consent]').count()) {
          out.steps.push('idp-consent');
          await page.click('button[type=submit]');
          await page.locator('input[name=prompt][value=consent]').waitFor({ state: 'detached' });
          acted = true;
        } else if (await page.locator('#approve').count()) {
          if (out.steps.includes('consent')) {
            throw new Error(`toolgate's consent page is still there after ${decision}${consoleErrors.length ? `; the page said: ${consoleErrors.join(' / ')}` : ''}`);
          }
          out.steps.push('consent');
          const u = new URL(page.url());
          const headers = documents.get(`${u.origin}${u.pathname}`) ?? {};
          out.consent = {
            url: masked(page.url()),
            text: (await page.locator('body').innerText()).replace(/\s+/g, ' ').trim().slice(0, 2000),
            title: await page.title(),
            csp: headers['content-security-policy'] ?? null,
            xFrameOptions: headers['x-frame-options'] ?? null,
            cacheControl: headers['cache-control'] ?? null,
          };
          const button = decision === 'deny' ? '#deny' : '#approve';
          await page.click(button);
          await page.locator(button).waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
          acted = true;
        }
      } catch (e) {
        // A navigation in the middle of a look: look again (the deadline still holds).
        if (!/context was destroyed|navigat|Target closed|detached/i.test(String(e.message))) throw e;
        acted = true;
      }
      if (acted) {
        idle = 0;
        continue;
      }
      await sleep(100);
      idle += 100;
      // Loaded, and nothing the user could do for 3 s: an error page (or a page of a new shape).
      if (idle >= 3000 && await page.evaluate(() => document.readyState).catch(() => '') === 'complete') {
        const text = (await page.locator('body').innerText().catch(() => '')).replace(/\s+/g, ' ').trim().slice(0, 600);
        throw new Error(`stuck at ${masked(page.url())} (nothing to click): "${text}"${consoleErrors.length ? `; the page said: ${consoleErrors.join(' / ')}` : ''}`);
      }
    }
  } catch (e) {
    out.error = String(e.message ?? e).split('\n')[0];
    log(`${label}: FAILED: ${out.error}`);
    if (args.shots) {
      const file = path.join(args.shots, `${label.replace(/[^\w.-]/g, '_')}-${Date.now()}.png`);
      await page.screenshot({ path: file, fullPage: true }).then(() => { out.screenshot = file; }).catch(() => {});
    }
  } finally {
    out.ms = Date.now() - started;
    if (keep) await page.close().catch(() => {});
    else await context.close().catch(() => {});
  }
  log(`${label}: ${out.ok ? 'signed in' : 'not signed in'} in ${out.ms} ms (${out.steps.join(', ') || 'no steps'}): ${out.navigations.map((n) => `${n.method} ${n.url.split('?')[0]} ${n.status ?? ''}`).join(' | ')}`);
  return out;
}

/**
 * A connect link of toolgate (issue 29) opened by the user: toolgate's page, its identity
 * provider's sign-in where asked (or silent SSO in a kept context), toolgate's "Connect your
 * account" page (#approve or #deny), the upstream service's authorization server (login and
 * consent), back to toolgate's callback; ends on the first toolgate page with nothing to click.
 */
async function connect({ url, context: name, idp, login = 'alice', upstream, upstreamLogin, password = 'any password', decision = 'approve', replay = false, click, label = 'connect', timeoutMs = 30_000 }) {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const out = { ok: false, label, navigations: [], steps: [], connectPage: null, upstreamAuthorization: null, final: null, replay: null };
  const { context, keep } = await contextFor(name);
  const page = await context.newPage();
  page.setDefaultTimeout(Math.min(15_000, timeoutMs));
  const consoleErrors = [];
  page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text().slice(0, 300)); });
  const documents = new Map();
  let last = null; // the last main-frame document response: {url, status}
  let callbackUrl = null; // toolgate's callback with the upstream's code and state (kept for a replay, never returned)
  const originOf = (u) => { try { return new URL(u).origin; } catch { return ''; } };
  const tg = originOf(url);
  const idpOrigin = idp ? originOf(idp) : null;
  const upstreamOrigin = upstream ? originOf(upstream) : null;
  const who = (o) => (o === idpOrigin ? 'idp' : o === upstreamOrigin ? 'upstream' : o === tg ? 'toolgate' : o);
  page.on('request', (req) => {
    if (!req.isNavigationRequest() || req.frame() !== page.mainFrame()) return;
    const entry = { method: req.method(), url: masked(req.url()) };
    out.navigations.push(entry);
    const u = new URL(req.url());
    if (u.origin === tg && u.pathname.startsWith('/oauth/vault/callback/') && !callbackUrl) callbackUrl = req.url();
    if (!out.upstreamAuthorization && upstreamOrigin && u.origin === upstreamOrigin && req.method() === 'GET' && u.searchParams.has('client_id')) {
      const params = Object.fromEntries(u.searchParams);
      for (const k of ['state', 'code_challenge']) if (params[k]) params[k] = `<${params[k].length}>`;
      out.upstreamAuthorization = { endpoint: `${u.origin}${u.pathname}`, params };
    }
    req.response().then((res) => {
      if (!res) return;
      entry.status = res.status();
      const r = new URL(res.url());
      documents.set(`${r.origin}${r.pathname}`, res.headers());
    }).catch(() => {});
  });
  page.on('response', (res) => {
    const req = res.request();
    if (req.isNavigationRequest() && req.frame() === page.mainFrame()) last = { url: masked(res.url()), status: res.status() };
  });
  const text = async () => (await page.locator('body').innerText().catch(() => '')).replace(/\s+/g, ' ').trim().slice(0, 1500);
  try {
    log(`${label}: open ${masked(url)}`);
    await page.goto(url, { waitUntil: 'commit' });
    let idle = 0;
    for (;;) {
      if (Date.now() > deadline) throw new Error(`the connect did not end on a toolgate page within ${timeoutMs} ms; the tab is at ${masked(page.url())}`);
      if (page.url().startsWith('chrome-error://')) {
        const l = out.navigations.at(-1);
        throw new Error(`the browser could not load ${l ? `${l.method} ${l.url}` : 'the page'} (connection refused or reset)`);
      }
      const origin = originOf(page.url());
      let acted = false;
      try {
        if (await page.locator('input[name=login]').count()) {
          const as = who(origin);
          out.steps.push(`${as}-login`);
          await page.fill('input[name=login]', as === 'upstream' ? (upstreamLogin ?? login) : login);
          await page.fill('input[name=password]', password);
          await page.click('button[type=submit]');
          await page.locator('input[name=login]').waitFor({ state: 'detached' });
          acted = true;
        } else if (await page.locator('input[name=prompt][value=consent]').count()) {
          out.steps.push(`${who(origin)}-consent`);
          await page.click('button[type=submit]');
          await page.locator('input[name=prompt][value=consent]').waitFor({ state: 'detached' });
          acted = true;
        } else if (origin === tg && await page.locator('#approve').count()) {
          if (out.steps.includes('connect-page')) throw new Error(`toolgate's connect page is still there after ${decision}${consoleErrors.length ? `; the page said: ${consoleErrors.join(' / ')}` : ''}`);
          out.steps.push('connect-page');
          const u = new URL(page.url());
          const headers = documents.get(`${u.origin}${u.pathname}`) ?? {};
          out.connectPage = {
            url: masked(page.url()),
            status: last?.status ?? null,
            text: await text(),
            title: await page.title(),
            deny: await page.locator('#deny').count(),
            csp: headers['content-security-policy'] ?? null,
            xFrameOptions: headers['x-frame-options'] ?? null,
            cacheControl: headers['cache-control'] ?? null,
          };
          const button = decision === 'deny' ? '#deny' : '#approve';
          await page.click(button);
          await page.locator(button).waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
          acted = true;
        } else if (origin === tg && click && !out.before && await page.locator(click).count()) {
          // a button of toolgate's page to press once (e.g. Disconnect on /oauth/connections)
          out.steps.push('click');
          out.before = { url: masked(page.url()), status: last?.status ?? null, text: await text() };
          await page.click(click);
          await page.locator(click).first().waitFor({ state: 'detached', timeout: 10_000 }).catch(() => {});
          acted = true;
        } else if (origin === tg && await page.evaluate(() => document.readyState).catch(() => '') === 'complete') {
          // toolgate's last page (connected, or a refusal): settle a moment, then read it
          await sleep(200);
          if (originOf(page.url()) === tg && !(await page.locator('#approve').count())) {
            out.final = { url: masked(page.url()), status: last?.status ?? null, title: await page.title(), text: await text() };
            if (click) out.final.clickable = await page.locator(click).count();
            out.ok = true;
            break;
          }
          acted = true;
        }
      } catch (e) {
        if (!/context was destroyed|navigat|Target closed|detached/i.test(String(e.message))) throw e;
        acted = true;
      }
      if (acted) {
        idle = 0;
        continue;
      }
      await sleep(100);
      idle += 100;
      if (idle >= 3000 && await page.evaluate(() => document.readyState).catch(() => '') === 'complete') {
        throw new Error(`stuck at ${masked(page.url())} (HTTP ${last?.status}, nothing to click): "${(await text()).slice(0, 600)}"${consoleErrors.length ? `; the page said: ${consoleErrors.join(' / ')}` : ''}`);
      }
    }
    if (replay) {
      // The upstream's redirect to toolgate's callback once more, in the same browser: no connect
      // is pending any more, so toolgate must refuse it (and must not redeem the code again).
      if (!callbackUrl) {
        out.replay = { error: 'no request to toolgate\'s callback was seen' };
      } else {
        const res = await page.goto(callbackUrl, { waitUntil: 'load' }).catch((e) => ({ error: String(e.message) }));
        out.replay = res?.error ? { error: res.error } : { url: masked(callbackUrl), status: res?.status() ?? null, text: await text() };
      }
    }
  } catch (e) {
    out.error = String(e.message ?? e).split('\n')[0];
    log(`${label}: FAILED: ${out.error}`);
    if (args.shots) {
      const file = path.join(args.shots, `${label.replace(/[^\w.-]/g, '_')}-${Date.now()}.png`);
      await page.screenshot({ path: file, fullPage: true }).then(() => { out.screenshot = file; }).catch(() => {});
    }
  } finally {
    out.ms = Date.now() - started;
    if (keep) await page.close().catch(() => {});
    else await context.close().catch(() => {});
  }
  log(`${label}: ${out.ok ? `ended at ${out.final.url} (${out.final.status})` : 'no end page'} in ${out.ms} ms (${out.steps.join(', ') || 'no steps'}): ${out.navigations.map((n) => `${n.method} ${n.url.split('?')[0]} ${n.status ?? ''}`).join(' | ')}`);
  return out;
}

const server = createServer((req, res) => {
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method !== 'POST' || !['/signin', '/connect'].includes(req.url)) return reply(404, { error: 'POST /signin or /connect' });
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    let job;
    try {
      job = JSON.parse(body);
      if (req.url === '/connect' && typeof job.url !== 'string') throw new Error('url is required');
      if (req.url === '/signin' && (typeof job.authorizationUrl !== 'string' || typeof job.redirectUri !== 'string')) throw new Error('authorizationUrl and redirectUri are required');
    } catch (e) {
      return reply(400, { ok: false, error: String(e.message) });
    }
    (req.url === '/connect' ? connect(job) : signin(job)).then((out) => reply(200, out), (e) => reply(500, { ok: false, error: String(e.message ?? e) }));
  });
});
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(args.port), '127.0.0.1', resolve);
});
const stop = async () => {
  server.close();
  await browser.close().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}`, chromium: browser.version(), pid: process.pid }));
log(`Chromium ${browser.version()} (headless) ready`);
