#!/usr/bin/env node
// The user's browser for tests/e2e/signin.sh and tests/cluster/signin.sh: one headless Chromium
// (Debian's /usr/bin/chromium, driven by playwright-core from $HARNESS_DIR/browser, both installed
// by tests/e2e/setup.sh), shared by every MCP client of a run, each sign-in in a fresh browser
// context (its own cookies, like a separate user profile).
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

async function signin({ authorizationUrl, redirectUri, login = 'alice', password = 'any password', decision = 'approve', label = 'signin', timeoutMs = 30_000 }) {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const out = { ok: false, label, navigations: [], steps: [], idpAuthorization: null, consent: null, redirect: null };
  const context = await browser.newContext();
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
    await context.close().catch(() => {});
  }
  log(`${label}: ${out.ok ? 'signed in' : 'not signed in'} in ${out.ms} ms (${out.steps.join(', ') || 'no steps'}): ${out.navigations.map((n) => `${n.method} ${n.url.split('?')[0]} ${n.status ?? ''}`).join(' | ')}`);
  return out;
}

const server = createServer((req, res) => {
  const reply = (status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  if (req.method !== 'POST' || req.url !== '/signin') return reply(404, { error: 'POST /signin' });
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    let job;
    try {
      job = JSON.parse(body);
      if (typeof job.authorizationUrl !== 'string' || typeof job.redirectUri !== 'string') throw new Error('authorizationUrl and redirectUri are required');
    } catch (e) {
      return reply(400, { ok: false, error: String(e.message) });
    }
    signin(job).then((out) => reply(200, out), (e) => reply(500, { ok: false, error: String(e.message ?? e) }));
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
