#!/usr/bin/env node
// A user signs in through toolgate's own authorization server with the official MCP TypeScript
// SDK (npm @modelcontextprotocol/sdk 1.x from $HARNESS_DIR/node), as a desktop MCP client does:
// the SDK's OAuthClientProvider, a loopback redirect listener (RFC 8252), and the browser of
// tests/e2e/oauth/browser.mjs playing the user (identity provider login and consent, then
// toolgate's consent page). Driven by tests/e2e/signin.sh and tests/cluster/signin.sh.
//
//   node ts_signin_client.mjs --url http://127.0.0.1:P/mcp --issuer http://127.0.0.1:P
//        --idp-issuer http://127.0.0.1:Q --browser http://127.0.0.1:B --registration dcr|cimd
//        [--client-metadata-url https://127.0.0.1:C/clients/ts.json] [--label ts-dcr]
//        [--expiry-max 120] [--timeout 150]
//
// Checks, in order (one `PASS <check>` or `FAIL <check>: <why>` line each on stdout; the run
// stops at the first failure of a step the next ones need):
//   discovery      401 -> protected-resource metadata naming toolgate's issuer -> its RFC 8414
//                  metadata (issuer byte-identical, S256 only, code, authorization_code and
//                  refresh_token, client_id_metadata_document_supported, iss response parameter)
//   sign-in        the SDK registers dynamically (dcr: POST <registration_endpoint> 201) or uses
//                  its metadata document URL as client_id (cimd: no registration), sends the user
//                  to /oauth/authorize (PKCE S256, resource = the MCP URL); in the browser:
//                  toolgate -> identity provider (toolgate's client, PKCE S256, nonce, its own
//                  callback, no `resource`) -> login -> provider consent -> toolgate's consent page
//                  (naming the client and mcp:tools; CSP, no framing) -> approve -> the loopback
//                  redirect with code, state and iss = toolgate's issuer (RFC 9207)
//   token          the code redeemed (grant authorization_code), an ES256 JWT signed by a key of
//                  toolgate's JWKS: iss, aud = the MCP URL, scope mcp:tools, client_id, lifetime;
//                  a refresh token
//   tools          tools/list has calculate_sum; calculate_sum {a:2,b:3} = "5"
//   expiry         the access token is refused (401) once it has expired (polled every 2 s)
//   refresh        the next calculate_sum: the SDK gets 401, refreshes (grant refresh_token, no
//                  new sign-in), gets a new access token and a rotated refresh token, and "5"
//   --again        then the client forgets its tokens and signs the user in once more: toolgate
//                  remembers the consent (same user, client and scopes), so its consent page is
//                  skipped; a new grant, "5"
import { createPublicKey, verify } from 'node:crypto';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { load, sdkVersion } from '../lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    issuer: { type: 'string' },
    'idp-issuer': { type: 'string' },
    browser: { type: 'string' },
    registration: { type: 'string' },
    'client-metadata-url': { type: 'string' },
    'client-name': { type: 'string' },
    label: { type: 'string' },
    login: { type: 'string', default: 'alice' },
    'expiry-max': { type: 'string', default: '120' },
    again: { type: 'boolean', default: false },
    timeout: { type: 'string', default: '150' },
  },
});
if (!args.url || !args.issuer || !args['idp-issuer'] || !args.browser || !['dcr', 'cimd'].includes(args.registration)
  || (args.registration === 'cimd' && !args['client-metadata-url'])) {
  console.error('usage: ts_signin_client.mjs --url MCP --issuer TOOLGATE --idp-issuer IDP --browser URL --registration dcr|cimd [--client-metadata-url URL]');
  process.exit(2);
}
const LABEL = args.label ?? `ts-${args.registration}`;
const MCP_URL = new URL(args.url);
const ISSUER = args.issuer;
const CIMD = args.registration === 'cimd';
const CLIENT_NAME = args['client-name'] ?? (CIMD ? 'toolgate e2e TypeScript (metadata document)' : 'toolgate e2e TypeScript (registered)');
const log = (...m) => console.error(`[${LABEL}]`, ...m);
setTimeout(() => {
  console.log(`FAIL ${LABEL} finished in time: still running after ${args.timeout} s`);
  process.exit(1);
}, Number(args.timeout) * 1000).unref();

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { UnauthorizedError } = await load('client/auth.js');

class CheckFailed extends Error {}
const check = (ok, why) => { if (!ok) throw new CheckFailed(why); };
let failures = 0;
/** Runs one named check; `soft`: a failure is reported and the run goes on. */
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

// ---- HTTP trace of everything the SDK sends --------------------------------------------------
const trace = [];
function tracingFetch(url, init) {
  const method = init?.method ?? 'GET';
  const target = String(url instanceof Request ? url.url : url);
  let grant;
  if (init?.body instanceof URLSearchParams) grant = init.body.get('grant_type') ?? undefined;
  else if (typeof init?.body === 'string' && init.body.includes('grant_type=')) grant = new URLSearchParams(init.body).get('grant_type') ?? undefined;
  return fetch(url, init).then((res) => {
    const entry = { method, url: target, status: res.status, grant, www: res.headers.get('www-authenticate') ?? undefined };
    trace.push(entry);
    log(`${method} ${target} -> ${res.status}${grant ? ` [${grant}]` : ''}${entry.www ? ` (${entry.www})` : ''}`);
    return res;
  });
}
const shown = (from = 0) => trace.slice(from).map((e) => `${e.method} ${e.url} ${e.status}${e.grant ? ` ${e.grant}` : ''}`).join(' | ');
function expectSequence(steps, from = 0) {
  let at = from;
  for (const s of steps) {
    const i = trace.findIndex((e, k) => k >= at && s.test(e));
    check(i >= 0, `the SDK's HTTP exchanges lack, after #${at}: ${s.what}; trace: ${shown(from)}`);
    at = i + 1;
  }
  return at;
}
/** A request any MCP server answers 200 to, when the token is accepted. */
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'expiry-probe', version: '1' } } });

// ---- the loopback redirect listener (RFC 8252) -----------------------------------------------
let arrived;
let arrival = new Promise((r) => { arrived = r; });
const callback = createServer((req, res) => {
  const u = new URL(req.url, 'http://127.0.0.1');
  if (u.pathname !== '/callback') {
    res.writeHead(404).end();
    return;
  }
  arrived(Object.fromEntries(u.searchParams));
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Signed in</title><p>Signed in. You can close this window.</p>');
});
await new Promise((r) => callback.listen(0, '127.0.0.1', r));
const REDIRECT = `http://127.0.0.1:${callback.address().port}/callback`;

// ---- the SDK's OAuthClientProvider, as a desktop client implements it ------------------------
class Provider {
  constructor() {
    this.savedTokens = [];
    this.signins = [];
    this._client = undefined;
    this._verifier = undefined;
    this._state = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadataUrl() { return CIMD ? args['client-metadata-url'] : undefined; }
  get clientMetadata() {
    return {
      client_name: CLIENT_NAME,
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    this._state = `st-${Math.random().toString(36).slice(2)}`;
    return this._state;
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this.savedTokens.at(-1); }
  saveTokens(tokens) { this.savedTokens.push(tokens); }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  /** "Opens the browser": the browser service plays the user until our listener gets the redirect. */
  async redirectToAuthorization(url) {
    arrival = new Promise((r) => { arrived = r; });
    const authorizationUrl = new URL(url);
    const res = await fetch(new URL('/signin', args.browser), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ authorizationUrl: authorizationUrl.href, redirectUri: REDIRECT, login: args.login, label: LABEL, timeoutMs: 40_000 }),
    });
    const browser = await res.json();
    const params = browser.ok ? await Promise.race([arrival, new Promise((r) => setTimeout(() => r(undefined), 5000))]) : undefined;
    this.signins.push({ authorizationUrl, browser, params });
  }
}

const provider = new Provider();
const newTransport = () => new StreamableHTTPClientTransport(MCP_URL, { authProvider: provider, fetch: tracingFetch });
const newClient = () => new Client({ name: `toolgate-e2e-${LABEL}`, version: '1.0.0' });
// The first connect stops for the sign-in (UnauthorizedError); the session is a second connect.
const signinTransport = newTransport();
const client = newClient();
let asMetadata;
let prm;
let idpAuthorization;

await step('discovery: 401 -> protected-resource metadata -> authorization server metadata', async () => {
  const res = await fetch(MCP_URL, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  await res.body?.cancel();
  check(res.status === 401, `POST ${MCP_URL} without a token answered ${res.status}, wanted 401`);
  const prmUrl = /resource_metadata="([^"]+)"/.exec(res.headers.get('www-authenticate') ?? '')?.[1];
  check(prmUrl, `no resource_metadata in the challenge: ${res.headers.get('www-authenticate')}`);
  prm = await (await fetch(prmUrl)).json();
  check(prm.resource === MCP_URL.href, `PRM resource ${prm.resource}, wanted ${MCP_URL.href}`);
  check(JSON.stringify(prm.authorization_servers) === JSON.stringify([ISSUER]), `PRM authorization_servers ${JSON.stringify(prm.authorization_servers)}, wanted ["${ISSUER}"]`);
  const metaRes = await fetch(`${ISSUER}/.well-known/oauth-authorization-server`);
  check(metaRes.status === 200, `GET ${ISSUER}/.well-known/oauth-authorization-server answered ${metaRes.status}`);
  asMetadata = await metaRes.json();
  const m = asMetadata;
  check(m.issuer === ISSUER, `metadata issuer ${JSON.stringify(m.issuer)}, wanted ${JSON.stringify(ISSUER)} byte for byte`);
  check(JSON.stringify(m.code_challenge_methods_supported) === '["S256"]', `code_challenge_methods_supported ${JSON.stringify(m.code_challenge_methods_supported)}`);
  check(m.response_types_supported?.includes('code'), `response_types_supported ${JSON.stringify(m.response_types_supported)}`);
  check(['authorization_code', 'refresh_token'].every((g) => m.grant_types_supported?.includes(g)), `grant_types_supported ${JSON.stringify(m.grant_types_supported)}`);
  check(m.client_id_metadata_document_supported === true, 'client_id_metadata_document_supported is not true');
  check(m.authorization_response_iss_parameter_supported === true, 'authorization_response_iss_parameter_supported is not true');
  check(m.token_endpoint_auth_methods_supported?.includes('none'), `token_endpoint_auth_methods_supported ${JSON.stringify(m.token_endpoint_auth_methods_supported)} lacks none`);
  check(m.jwks_uri, 'no jwks_uri');
  if (!CIMD) check(m.registration_endpoint, 'no registration_endpoint (dynamic registration is on)');
  return `issuer ${m.issuer}`;
});

await step(`sign-in with ${CIMD ? 'a Client ID Metadata Document' : 'dynamic registration'} through the browser`, async () => {
  let error;
  try {
    await newClient().connect(signinTransport);
  } catch (e) {
    error = e;
  }
  check(error instanceof UnauthorizedError, `the first connect should stop for the user's sign-in, got ${error ? error.message : 'a session without one'}`);
  check(provider.signins.length === 1, `the SDK sent the user to sign in ${provider.signins.length} times`);
  const { authorizationUrl, browser, params } = provider.signins[0];
  check(browser.ok, `the browser did not come back to the client: ${browser.error}; path: ${(browser.navigations ?? []).map((n) => `${n.method} ${n.url.split('?')[0]} ${n.status ?? ''}`).join(' | ')}`);
  check(params, 'the browser reached the redirect URI but the loopback listener got nothing');
  // what the SDK asked toolgate for
  const q = authorizationUrl.searchParams;
  check(`${authorizationUrl.origin}${authorizationUrl.pathname}` === asMetadata.authorization_endpoint, `authorization URL ${authorizationUrl.origin}${authorizationUrl.pathname}, wanted ${asMetadata.authorization_endpoint}`);
  check(q.get('code_challenge_method') === 'S256' && q.get('code_challenge'), 'the authorization request has no S256 PKCE');
  check(q.get('resource') === MCP_URL.href, `the authorization request's resource ${q.get('resource')}, wanted ${MCP_URL.href}`);
  const clientId = provider.clientInformation()?.client_id;
  check(q.get('client_id') === clientId, `client_id ${q.get('client_id')} in the authorization request, the SDK holds ${clientId}`);
  if (CIMD) {
    check(clientId === args['client-metadata-url'], `client_id ${clientId}, wanted the metadata document URL ${args['client-metadata-url']}`);
    check(!trace.some((e) => e.method === 'POST' && e.url === asMetadata.registration_endpoint), 'the SDK registered although the server supports metadata documents');
  } else {
    check(!clientId.startsWith('https://'), `a registered client_id starts with https:// (${clientId})`);
  }
  // what toolgate asked the identity provider for (the browser saw the request)
  idpAuthorization = browser.idpAuthorization;
  check(idpAuthorization, 'the browser never left toolgate for the identity provider');
  const idp = idpAuthorization.params;
  check(idpAuthorization.endpoint === `${args['idp-issuer']}/auth`, `toolgate sent the user to ${idpAuthorization.endpoint}, wanted ${args['idp-issuer']}/auth`);
  check(idp.client_id === 'toolgate', `client_id ${idp.client_id} at the provider, wanted toolgate`);
  check(idp.redirect_uri === `${ISSUER}/oauth/callback`, `redirect_uri ${idp.redirect_uri} at the provider, wanted ${ISSUER}/oauth/callback`);
  check(idp.response_type === 'code', `response_type ${idp.response_type} at the provider`);
  check(idp.code_challenge_method === 'S256' && idp.code_challenge, 'no S256 PKCE at the provider');
  check(idp.nonce, 'no nonce at the provider');
  check((idp.scope ?? '').split(' ').includes('openid'), `scope ${idp.scope} at the provider lacks openid`);
  check(!('resource' in idp), `toolgate passed resource=${idp.resource} on to the provider`);
  check(browser.steps[0] === 'idp-login', `the user's steps were ${browser.steps.join(', ')}, wanted the provider's login first`);
  check(browser.steps.includes('consent'), `toolgate's consent page never showed (steps: ${browser.steps.join(', ')})`);
  // the answer to the client
  check(!params.error, `toolgate answered error=${params.error}: ${params.error_description}`);
  check(params.code, 'no code in the redirect');
  check(params.state === provider._state, `state ${params.state} came back, wanted ${provider._state}`);
  check(params.iss === ISSUER, `iss ${params.iss} in the redirect, wanted ${ISSUER} (RFC 9207)`);
  await signinTransport.finishAuth(params.code);
  return `${browser.steps.join(' -> ')}, ${browser.ms} ms in the browser`;
});

await step("toolgate's consent page: the client, the scope, CSP and no framing", async () => {
  const { consent } = provider.signins[0].browser;
  check(consent.text.includes(CLIENT_NAME), `the consent page does not name the client "${CLIENT_NAME}": "${consent.text.slice(0, 400)}"`);
  check(consent.text.includes('mcp:tools'), `the consent page does not show mcp:tools: "${consent.text.slice(0, 400)}"`);
  check(consent.text.includes('127.0.0.1'), `the consent page does not say where the code goes (127.0.0.1): "${consent.text.slice(0, 400)}"`);
  check(consent.csp, 'the consent page has no Content-Security-Policy');
  check(/frame-ancestors 'none'/.test(consent.csp) || /deny/i.test(consent.xFrameOptions ?? ''), `the consent page may be framed (CSP ${consent.csp}, X-Frame-Options ${consent.xFrameOptions})`);
}, { soft: true });

let firstTokens;
let claims;
await step('token: code redeemed for an ES256 JWT of toolgate (JWKS), a refresh token', async () => {
  firstTokens = provider.tokens();
  check(firstTokens?.access_token, 'no access token saved');
  check(firstTokens.refresh_token, 'no refresh token');
  expectSequence([
    { what: 'POST <token_endpoint> [authorization_code] -> 200', test: (e) => e.method === 'POST' && e.url === asMetadata.token_endpoint && e.grant === 'authorization_code' && e.status === 200 },
  ]);
  const [h, p, s] = firstTokens.access_token.split('.');
  check(s, 'the access token is not a JWS');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  claims = JSON.parse(Buffer.from(p, 'base64url'));
  check(header.alg === 'ES256' && header.typ === 'at+jwt', `alg ${header.alg} typ ${header.typ}, wanted ES256 at+jwt (RFC 9068)`);
  const jwks = await (await fetch(asMetadata.jwks_uri)).json();
  const jwk = jwks.keys?.find((k) => k.kid === header.kid);
  check(jwk, `kid ${header.kid} is not in ${asMetadata.jwks_uri}`);
  const signed = verify('sha256', Buffer.from(`${h}.${p}`), { key: createPublicKey({ key: jwk, format: 'jwk' }), dsaEncoding: 'ieee-p1363' }, Buffer.from(s, 'base64url'));
  check(signed, 'the signature does not verify with the JWKS key');
  check(claims.iss === ISSUER, `iss ${claims.iss}, wanted ${ISSUER}`);
  check([claims.aud].flat().includes(MCP_URL.href), `aud ${JSON.stringify(claims.aud)}, wanted ${MCP_URL.href}`);
  check((claims.scope ?? '').split(' ').includes('mcp:tools'), `scope "${claims.scope}" lacks mcp:tools`);
  check(claims.client_id === provider.clientInformation().client_id, `client_id ${claims.client_id}, wanted ${provider.clientInformation().client_id}`);
  check(claims.sub, 'no sub');
  check(claims.exp - claims.iat <= 30 && claims.exp > Date.now() / 1000, `lifetime exp-iat = ${claims.exp - claims.iat} s, wanted <= 30 (access_token_ttl_secs) and not expired`);
  return `sub ${claims.sub}, kid ${header.kid}, typ ${header.typ}`;
});

await step('tools/list and calculate_sum = 5', async () => {
  await client.connect(newTransport());
  const tools = await client.listTools();
  check(tools.tools.some((t) => t.name === 'calculate_sum'), `tools/list lacks calculate_sum: ${tools.tools.map((t) => t.name).join(', ')}`);
  const res = await client.callTool({ name: 'calculate_sum', arguments: { a: 2, b: 3 } });
  const text = res.content?.find((c) => c.type === 'text')?.text;
  check(!res.isError && text === '5', `calculate_sum {a:2,b:3} answered ${JSON.stringify(res)}`);
  return `${tools.tools.length} tools`;
});

await step('the access token is refused once expired', async () => {
  const deadline = Date.now() + Number(args['expiry-max']) * 1000;
  // Nothing to ask before exp; then every 2 s until toolgate's leeway is over.
  await new Promise((r) => setTimeout(r, Math.max(0, (claims.exp + 1) * 1000 - Date.now())));
  for (;;) {
    const res = await fetch(MCP_URL, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${firstTokens.access_token}` },
      body: INITIALIZE,
    });
    await res.body?.cancel();
    if (res.status === 401) return `refused ${Math.round(Date.now() / 1000 - claims.exp)} s after exp`;
    check(res.status === 200, `HTTP ${res.status} for initialize with the token ${Math.round(Date.now() / 1000 - claims.exp)} s after exp, wanted 200 (leeway) or 401`);
    check(Date.now() < deadline, `still accepted (HTTP ${res.status}) ${Math.round(Date.now() / 1000 - claims.exp)} s after exp`);
    await new Promise((r) => setTimeout(r, 2000));
  }
});

await step('refresh: 401 -> refresh_token grant -> new tokens -> calculate_sum = 5', async () => {
  const from = trace.length;
  const res = await client.callTool({ name: 'calculate_sum', arguments: { a: 2, b: 3 } });
  const text = res.content?.find((c) => c.type === 'text')?.text;
  check(!res.isError && text === '5', `calculate_sum after expiry answered ${JSON.stringify(res)}`);
  expectSequence([
    { what: `POST ${MCP_URL.href} -> 401`, test: (e) => e.method === 'POST' && e.url === MCP_URL.href && e.status === 401 },
    { what: 'POST <token_endpoint> [refresh_token] -> 200', test: (e) => e.method === 'POST' && e.url === asMetadata.token_endpoint && e.grant === 'refresh_token' && e.status === 200 },
    { what: `POST ${MCP_URL.href} -> 200`, test: (e) => e.method === 'POST' && e.url === MCP_URL.href && e.status === 200 },
  ], from);
  check(provider.signins.length === 1, `the user was sent to sign in again (${provider.signins.length} sign-ins)`);
  const now = provider.tokens();
  check(now.access_token !== firstTokens.access_token, 'the access token did not change');
  check(now.refresh_token && now.refresh_token !== firstTokens.refresh_token, 'the refresh token was not rotated');
  const p = JSON.parse(Buffer.from(now.access_token.split('.')[1], 'base64url'));
  check(p.sub === claims.sub && p.client_id === claims.client_id && p.exp > Date.now() / 1000, `the new token: sub ${p.sub}, client_id ${p.client_id}, exp ${p.exp}`);
  return `${trace.slice(from).filter((e) => e.grant === 'refresh_token').length} refresh`;
});

if (args.again) {
  await step("a second sign-in: toolgate's consent is remembered (no consent page)", async () => {
    provider.savedTokens.push(undefined);
    const again = newTransport();
    let error;
    try {
      await newClient().connect(again);
    } catch (e) {
      error = e;
    }
    check(error instanceof UnauthorizedError, `the connect without tokens should stop for the sign-in, got ${error ? error.message : 'a session'}`);
    check(provider.signins.length === 2, `${provider.signins.length} sign-ins, wanted 2`);
    const { browser, params } = provider.signins[1];
    check(browser.ok && params?.code, `the second sign-in failed: ${browser.error ?? JSON.stringify(params)}`);
    check(!browser.steps.includes('consent'), `toolgate asked for consent again (steps: ${browser.steps.join(', ')})`);
    check(params.iss === ISSUER && params.state === provider._state, `iss ${params.iss}, state ${params.state}`);
    await again.finishAuth(params.code);
    const second = newClient();
    await second.connect(newTransport());
    const res = await second.callTool({ name: 'calculate_sum', arguments: { a: 2, b: 3 } });
    check(res.content?.find((c) => c.type === 'text')?.text === '5', `calculate_sum answered ${JSON.stringify(res)}`);
    await second.close().catch(() => {});
    return browser.steps.join(' -> ');
  });
}

await client.close().catch(() => {});
log(`done (typescript-sdk ${sdkVersion})`);
finish();
