#!/usr/bin/env node
// A user of toolgate connects their own account at an upstream service with the official MCP
// TypeScript SDK (npm @modelcontextprotocol/sdk 1.x from $HARNESS_DIR/node, protocol 2025-11-25;
// this SDK has no 2026-07-28 client). Driven by tests/e2e/connect.sh:
//
//   node ts_connect_client.mjs --url http://127.0.0.1:T/mcp --issuer http://127.0.0.1:T
//        --idp-issuer http://127.0.0.1:I --upstream-issuer http://127.0.0.1:A --upstream-url http://127.0.0.1:U/mcp
//        --browser http://127.0.0.1:B --admin-url http://127.0.0.1:M --login bob --upstream-login octo-bob
//        --notes-marker "bob:" --foreign-marker "alice:" [--wait-for FILE] [--tokens-file FILE]
//        [--access-ttl 20] [--label ts-bob] [--timeout 150]
//
// The admin token comes in the environment (ADMIN_TOKEN). Checks (one `PASS <check>` or
// `FAIL <check>: <why>` line each on stdout; the run stops at the first failure of a step the
// next ones need):
//   sign-in     the SDK's OAuthClientProvider signs the user in at toolgate (dynamic registration,
//               the browser of tests/e2e/oauth/browser.mjs in a context kept as --login); the
//               client declares capabilities.elicitation.url
//   tools/list  notes_whoami and notes_my_notes listed before any connection
//   -32042      callTool(notes_whoami) throws the SDK's UrlElicitationRequiredError: one URL-mode
//               elicitation (elicitationId, message, url {issuer}/oauth/connect/notes?c=<43>)
//   connect     (after --wait-for exists: the other client's abuse checks are done) the user's
//               browser opens the link: silent sign-in at the identity provider, toolgate's connect
//               page (#approve), the upstream's login and consent, an end page saying "connected"
//   own data    the retried notes_whoami = --upstream-login, notes_my_notes only --notes-marker lines
//   refresh     after --access-ttl + 2 s: notes_my_notes still answers
//   revoke      on the user's own page ({issuer}/oauth/connections, in the same browser: no new
//               sign-in) the notes row's Disconnect button (#disconnect-notes); the page then has
//               none; GET /admin/connections no longer lists it; the next call throws
//               UrlElicitationRequiredError again
import { existsSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { load, sdkVersion } from '../lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    issuer: { type: 'string' },
    'idp-issuer': { type: 'string' },
    'upstream-issuer': { type: 'string' },
    'upstream-url': { type: 'string' },
    browser: { type: 'string' },
    'admin-url': { type: 'string' },
    login: { type: 'string' },
    'upstream-login': { type: 'string' },
    'notes-marker': { type: 'string' },
    'foreign-marker': { type: 'string' },
    'wait-for': { type: 'string' },
    'tokens-file': { type: 'string' },
    'access-ttl': { type: 'string', default: '20' },
    label: { type: 'string' },
    timeout: { type: 'string', default: '150' },
  },
});
for (const k of ['url', 'issuer', 'idp-issuer', 'upstream-issuer', 'upstream-url', 'browser', 'admin-url', 'login', 'upstream-login', 'notes-marker', 'foreign-marker']) {
  if (!args[k]) {
    console.error(`ts_connect_client.mjs: --${k} is required`);
    process.exit(2);
  }
}
const LABEL = args.label ?? `ts-${args.login}`;
const ISSUER = args.issuer.replace(/\/$/, '');
const MCP_URL = new URL(args.url);
const log = (...m) => console.error(`[${LABEL}]`, ...m);
setTimeout(() => {
  console.log(`FAIL ${LABEL}: finished in time: still running after ${args.timeout} s`);
  process.exit(1);
}, Number(args.timeout) * 1000).unref();

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { UnauthorizedError } = await load('client/auth.js');
const { UrlElicitationRequiredError, McpError, ElicitRequestSchema } = await load('types.js');

class CheckFailed extends Error {}
const check = (ok, why) => { if (!ok) throw new CheckFailed(why); };
let failures = 0;
async function step(name, fn, { soft = false } = {}) {
  try {
    const detail = await fn();
    console.log(`PASS ${LABEL}: ${name}${detail ? ` (${detail})` : ''}`);
    return true;
  } catch (e) {
    failures++;
    console.log(`FAIL ${LABEL}: ${name}: ${String(e instanceof CheckFailed ? e.message : e?.stack ?? e).split('\n').slice(0, 3).join(' | ')}`);
    if (!soft) finish();
    return false;
  }
}
function finish() {
  callback.close();
  process.exit(failures ? 1 : 0);
}

// ---- the loopback redirect listener of the sign-in (RFC 8252) ----------------------------------
let arrived;
let arrival = new Promise((r) => { arrived = r; });
const callback = createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  if (u.pathname !== '/callback') {
    res.writeHead(404).end();
    return;
  }
  arrived(Object.fromEntries(u.searchParams));
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Signed in</title><p>Signed in.</p>');
});
await new Promise((r) => callback.listen(0, '127.0.0.1', r));
const REDIRECT = `http://127.0.0.1:${callback.address().port}/callback`;

class Provider {
  constructor() {
    this.savedTokens = [];
    this.signins = [];
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return {
      client_name: `toolgate e2e connect (${LABEL})`,
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() { return `st-${Math.random().toString(36).slice(2)}`; }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this.savedTokens.at(-1); }
  saveTokens(tokens) {
    this.savedTokens.push(tokens);
    if (args['tokens-file']) appendFileSync(args['tokens-file'], `${tokens.access_token}\n${tokens.refresh_token ? `${tokens.refresh_token}\n` : ''}`, { mode: 0o600 });
  }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  async redirectToAuthorization(url) {
    arrival = new Promise((r) => { arrived = r; });
    const res = await fetch(new URL('/signin', args.browser), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ authorizationUrl: new URL(url).href, redirectUri: REDIRECT, login: args.login, label: `${LABEL}-signin`, timeoutMs: 40_000, context: args.login }),
    });
    const browser = await res.json();
    const params = browser.ok ? await Promise.race([arrival, new Promise((r) => setTimeout(() => r(undefined), 5000))]) : undefined;
    this.signins.push({ browser, params });
  }
}

const provider = new Provider();
const newTransport = () => new StreamableHTTPClientTransport(MCP_URL, { authProvider: provider });
// A desktop client that can open URLs: it declares URL-mode elicitation.
const newClient = () => {
  const c = new Client({ name: `toolgate-e2e-${LABEL}`, version: '1.0.0' }, { capabilities: { elicitation: { url: {} } } });
  c.setRequestHandler(ElicitRequestSchema, async (request) => {
    elicitRequests.push(request.params);
    log(`elicitation/create request: ${JSON.stringify(request.params)}`);
    return { action: 'decline' };
  });
  return c;
};
const elicitRequests = [];
const client = newClient();
const state = {};

async function browserConnect(url, extra = {}) {
  const res = await fetch(new URL('/connect', args.browser), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url, context: args.login, idp: args['idp-issuer'], login: args.login, upstream: args['upstream-issuer'], upstreamLogin: args['upstream-login'], label: `${LABEL}-connect`, timeoutMs: 40_000, ...extra }),
  });
  return res.json();
}
const pathOf = (out) => (out.navigations ?? []).map((n) => `${n.method} ${n.url.split('?')[0]} ${n.status ?? ''}`).join(' | ');

async function expectElicitation(tool) {
  let result;
  try {
    result = await client.callTool({ name: tool, arguments: {} });
  } catch (e) {
    check(e instanceof UrlElicitationRequiredError, `${tool} threw ${e instanceof McpError ? `McpError ${e.code}` : e?.name}: ${e?.message}, wanted UrlElicitationRequiredError (-32042)`);
    check(e.code === -32042, `code ${e.code}`);
    check(e.elicitations.length === 1, `${e.elicitations.length} elicitations: ${JSON.stringify(e.data)}`);
    const el = e.elicitations[0];
    check(el.mode === 'url' && el.elicitationId && el.message, `elicitation ${JSON.stringify(el)}`);
    check(el.url.startsWith(`${ISSUER}/oauth/connect/notes?c=`), `url ${el.url}, wanted ${ISSUER}/oauth/connect/notes?c=<id>`);
    const c = new URL(el.url).searchParams.get('c') ?? '';
    check(c.length === 43, `connect id of ${c.length} characters, wanted 43`);
    const access = provider.tokens()?.access_token;
    check(!el.url.includes(args.login) && (!access || !el.url.includes(access)), `the link carries the user's name or token: ${el.url}`);
    return { url: el.url, id: el.elicitationId, c, message: el.message };
  }
  throw new CheckFailed(`${tool} answered a result, wanted the -32042 error: ${JSON.stringify(result)}`);
}
async function callText(tool) {
  const res = await client.callTool({ name: tool, arguments: {} });
  const text = (res.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
  check(!res.isError, `${tool} answered isError: ${JSON.stringify(text)}`);
  return text;
}

await step('sign-in at toolgate through the browser (2025-11-25, capabilities.elicitation.url)', async () => {
  const signinTransport = newTransport();
  let error;
  try {
    await newClient().connect(signinTransport);
  } catch (e) {
    error = e;
  }
  check(error instanceof UnauthorizedError, `the first connect should stop for the user's sign-in, got ${error ? error.message : 'a session'}`);
  const { browser, params } = provider.signins[0] ?? {};
  check(browser?.ok, `the browser did not come back: ${browser?.error}; path: ${pathOf(browser ?? {})}`);
  check(params?.code, `no code in the redirect: ${JSON.stringify(params)}`);
  await signinTransport.finishAuth(params.code);
  await client.connect(newTransport());
  check(client.transport.protocolVersion === undefined || client.transport.protocolVersion === '2025-11-25', `protocol ${client.transport.protocolVersion}`);
  const claims = JSON.parse(Buffer.from(provider.tokens().access_token.split('.')[1], 'base64url'));
  state.sub = claims.sub;
  return `sub ${claims.sub}, ${browser.steps.join(' -> ')}`;
});

await step('tools/list shows notes_whoami and notes_my_notes before any connection', async () => {
  const names = (await client.listTools()).tools.map((t) => t.name);
  check(names.includes('notes_whoami') && names.includes('notes_my_notes'), `tools/list: ${names.join(', ')}`);
  return `${names.length} tools`;
}, { soft: true });

await step('notes_whoami unconnected: UrlElicitationRequiredError (-32042) with one URL elicitation', async () => {
  state.first = await expectElicitation('notes_whoami');
  return `elicitationId ${state.first.id}, ${state.first.url.split('?')[0]}`;
});

if (args['wait-for']) {
  const until = Date.now() + 90_000;
  while (!existsSync(args['wait-for']) && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
  if (!existsSync(args['wait-for'])) log(`${args['wait-for']} did not appear within 90 s; going on`);
}

await step("connect in the browser: silent sign-in, toolgate's connect page, the upstream's login and consent, 'connected'", async () => {
  const out = await browserConnect(state.first.url);
  const final = out.final ?? {};
  check(out.ok, `the browser did not end on a toolgate page: ${out.error}; path: ${pathOf(out)}`);
  check(final.status === 200 && /connected/i.test(final.text ?? ''), `end page HTTP ${final.status}: ${JSON.stringify((final.text ?? '').slice(0, 300))}`);
  check(out.steps.includes('connect-page') && out.steps.includes('upstream-login') && !out.steps.includes('idp-login'), `steps ${out.steps.join(', ')}`);
  const p = out.upstreamAuthorization?.params ?? {};
  check(p.client_id === 'toolgate-notes' && p.code_challenge_method === 'S256' && p.resource === args['upstream-url']
    && p.redirect_uri === `${ISSUER}/oauth/vault/callback/notes`, `authorization request at the upstream: ${JSON.stringify(p)}`);
  return `${out.steps.join(' -> ')}, ${out.ms} ms`;
});

await step('the retried call: notes_whoami and notes_my_notes answer the user\'s own account', async () => {
  const who = await callText('notes_whoami');
  check(who === args['upstream-login'], `notes_whoami answered ${JSON.stringify(who)}, wanted ${args['upstream-login']}`);
  const notes = await callText('notes_my_notes');
  const lines = notes.split('\n');
  check(lines.length && lines.every((l) => l.startsWith(args['notes-marker'])), `notes_my_notes answered ${JSON.stringify(notes)}`);
  check(!notes.includes(args['foreign-marker']), `another user's notes: ${JSON.stringify(notes)}`);
  check(!elicitRequests.length, `toolgate sent elicitation/create requests: ${JSON.stringify(elicitRequests)}`);
  return `${who}: ${lines.length} notes`;
});

await step('after the upstream access token expired: the calls still answer (refreshed)', async () => {
  await new Promise((r) => setTimeout(r, (Number(args['access-ttl']) + 2) * 1000));
  const notes = await callText('notes_my_notes');
  check(notes.startsWith(args['notes-marker']), `notes_my_notes answered ${JSON.stringify(notes)}`);
  return `${Number(args['access-ttl']) + 2} s after the connect`;
});

await step("revoke on the user's own page: /oauth/connections lists notes, Disconnect; then the next call asks to connect again", async () => {
  const out = await browserConnect(`${ISSUER}/oauth/connections`, { click: '#disconnect-notes', label: `${LABEL}-disconnect` });
  check(out.ok, `the browser did not end on a toolgate page: ${out.error}; path: ${pathOf(out)}`);
  check(out.steps.includes('click'), `no Disconnect button for notes on ${ISSUER}/oauth/connections (steps ${out.steps.join(', ')}): ${JSON.stringify((out.final?.text ?? '').slice(0, 300))}`);
  check(/notes/.test(out.before?.text ?? '') && out.before?.status === 200, `the connections page (HTTP ${out.before?.status}): ${JSON.stringify((out.before?.text ?? '').slice(0, 300))}`);
  check(!out.steps.includes('idp-login'), `the page asked the user to sign in again (steps ${out.steps.join(', ')})`);
  check(out.final.status === 200 && out.final.clickable === 0, `after Disconnect: HTTP ${out.final.status}, ${out.final.clickable} Disconnect button(s) for notes: ${JSON.stringify(out.final.text.slice(0, 300))}`);
  const res = await fetch(`${args['admin-url']}/admin/connections`, { headers: { authorization: `Bearer ${process.env.ADMIN_TOKEN ?? ''}` } });
  check(res.status === 200, `GET /admin/connections: ${res.status}`);
  const left = ((await res.json()).connections ?? []).filter((r) => r.upstream === 'notes' && state.sub && String(r.user).includes(state.sub));
  check(!left.length, `GET /admin/connections still lists it: ${JSON.stringify(left)}`);
  const again = await expectElicitation('notes_whoami');
  check(again.c !== state.first.c, 'the old link again');
  return `${out.steps.join(' -> ')}; -32042 again`;
});

await client.close().catch(() => {});
log(`done (typescript-sdk ${sdkVersion})`);
finish();
