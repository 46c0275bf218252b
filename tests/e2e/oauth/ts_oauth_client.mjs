#!/usr/bin/env node
// OAuth end to end with the official MCP TypeScript SDK (npm @modelcontextprotocol/sdk 1.x, from
// $HARNESS_DIR/node/node_modules), against toolgate in auth mode "jwt" and the real authorization
// server of tests/e2e/oauth/as.mjs. Driven by tests/e2e/oauth.sh.
//
//   node ts_oauth_client.mjs --url http://127.0.0.1:P/mcp --issuer http://127.0.0.1:Q --scenario NAME
//
// Scenarios (each in a fresh process, starting with no token):
//   client-credentials  the SDK's ClientCredentialsProvider as the transport's authProvider: the
//                       first POST gets 401, the SDK reads resource_metadata and scope from the
//                       challenge, fetches the protected-resource metadata, takes the
//                       authorization server from it, discovers its metadata, gets a token with
//                       grant client_credentials and resource=<PRM resource>, retries; then
//                       calculate_sum {a:2,b:3} must answer "5"
//   authorization-code  an interactive OAuthClientProvider: dynamic client registration,
//                       authorization code + PKCE (S256) with resource=<PRM resource>; the
//                       authorization URL is followed with fetch (the AS logs in and consents
//                       automatically), the code taken from the redirect, transport.finishAuth()
//   wrong-resource      a token minted by the same AS (SDK auth() flow) for resource
//                       https://other.example.com/mcp must get 401 invalid_token from toolgate;
//                       then an SDK client holding that token must recover by itself (401 ->
//                       new token for the right resource -> "5")
//   insufficient-scope  a token for toolgate's resource with scope mcp:other only must get 403
//                       insufficient_scope naming mcp:tools; then the interactive SDK client
//                       holding it must step up (403 -> authorization with the challenge's scope
//                       -> "5")
//
// Besides the SDK's own checks, every HTTP exchange the SDK makes is recorded and the sequence
// asserted (401 from /mcp, the PRM document from the challenge's URL, the AS metadata from the
// issuer, the token endpoint, then 200 from /mcp), and the access token's header and claims are
// checked (RS256, typ at+jwt, iss, aud, scope). Prints one JSON line; exit status 0 only if every
// check passed.
import { parseArgs } from 'node:util';

import { load, sdkVersion } from '../lib/sdk.mjs';

const SCENARIOS = ['client-credentials', 'authorization-code', 'wrong-resource', 'insufficient-scope'];
const { values: args } = parseArgs({
  options: {
    url: { type: 'string' },
    issuer: { type: 'string' },
    scenario: { type: 'string' },
    'client-id': { type: 'string', default: 'mcp-m2m' },
    'client-secret': { type: 'string', default: 'mcp-m2m-secret' },
    'other-resource': { type: 'string', default: 'https://other.example.com/mcp' },
    timeout: { type: 'string', default: '60' },
  },
});
if (!args.url || !args.issuer || !SCENARIOS.includes(args.scenario)) {
  console.error(`usage: ts_oauth_client.mjs --url MCP_URL --issuer AS_ISSUER --scenario ${SCENARIOS.join('|')}`);
  process.exit(2);
}

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { auth, UnauthorizedError } = await load('client/auth.js');
const { ClientCredentialsProvider } = await load('client/auth-extensions.js');

const MCP_URL = new URL(args.url);
const ISSUER = args.issuer;
const out = { client: `typescript-sdk-${sdkVersion}`, scenario: args.scenario, passed: [], errors: [] };
class CheckFailed extends Error {}
function check(ok, message) {
  if (!ok) throw new CheckFailed(message);
}
const log = (...m) => console.error(`[${args.scenario}]`, ...m);

// ---- HTTP trace: every request the SDK makes goes through this fetch -------------------------
const trace = [];
function tracingFetch(url, init) {
  const method = init?.method ?? 'GET';
  const target = String(url instanceof Request ? url.url : url);
  return fetch(url, init).then((res) => {
    const entry = { method, url: target, status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') ?? undefined };
    trace.push(entry);
    log(`${method} ${target} -> ${res.status}${entry.wwwAuthenticate ? ` (${entry.wwwAuthenticate})` : ''}`);
    return res;
  });
}
const pathOf = (u) => new URL(u).pathname;
/** Asserts that `steps` occur in the trace in this order (other requests may come between). */
function expectSequence(steps, from = 0) {
  let at = from;
  for (const step of steps) {
    const i = trace.findIndex((e, k) => k >= at && step.test(e));
    check(i >= 0, `the SDK's HTTP exchanges lack, after #${at}: ${step.what}; trace: ${
      trace.map((e) => `${e.method} ${e.url} ${e.status}`).join(' | ')}`);
    at = i + 1;
  }
  return at;
}
const isMcp = (e) => e.url === MCP_URL.href && e.method === 'POST';
const step = {
  mcp401: { what: `POST ${MCP_URL.href} -> 401 with a resource_metadata challenge`, test: (e) => isMcp(e) && e.status === 401 && /resource_metadata="/.test(e.wwwAuthenticate ?? '') },
  mcp403: { what: `POST ${MCP_URL.href} -> 403 insufficient_scope`, test: (e) => isMcp(e) && e.status === 403 && /error="insufficient_scope"/.test(e.wwwAuthenticate ?? '') },
  prm: (url) => ({ what: `GET ${url} -> 200`, test: (e) => e.method === 'GET' && e.url === url && e.status === 200 }),
  asMeta: { what: `GET ${ISSUER}/.well-known/(oauth-authorization-server|openid-configuration) -> 200`,
    test: (e) => e.method === 'GET' && e.status === 200 && new URL(e.url).origin === new URL(ISSUER).origin
      && ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'].includes(pathOf(e.url)) },
  register: { what: 'POST <registration_endpoint> -> 201', test: (e) => e.method === 'POST' && e.status === 201 && new URL(e.url).origin === new URL(ISSUER).origin },
  token: { what: 'POST <token_endpoint> -> 200', test: (e) => e.method === 'POST' && e.status === 200 && new URL(e.url).origin === new URL(ISSUER).origin && pathOf(e.url) === '/token' },
  mcp200: { what: `POST ${MCP_URL.href} -> 200`, test: (e) => isMcp(e) && e.status === 200 },
};

/** The challenge parameters of a WWW-Authenticate: Bearer header. */
function challengeParams(header) {
  const params = {};
  for (const m of (header ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)) params[m[1]] = m[2];
  return params;
}

// ---- token inspection (no verification: toolgate does that; this checks what the AS issued) --
function decodeJwt(token) {
  const parts = token.split('.');
  check(parts.length === 3, `the access token is not a JWS compact serialization (${parts.length} parts)`);
  const [header, payload] = parts.slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString('utf8')));
  return { header, payload };
}
function checkToken(token, { aud, scopes, sub }) {
  const { header, payload } = decodeJwt(token);
  check(header.alg === 'RS256', `token alg ${header.alg}, wanted RS256`);
  check(header.typ === 'at+jwt', `token typ ${header.typ}, wanted at+jwt (RFC 9068)`);
  check(payload.iss === ISSUER, `token iss ${payload.iss}, wanted ${ISSUER}`);
  const auds = [payload.aud].flat();
  check(auds.length === 1 && auds[0] === aud, `token aud ${JSON.stringify(payload.aud)}, wanted ${aud}`);
  const granted = (payload.scope ?? '').split(' ').filter(Boolean).sort();
  check(JSON.stringify(granted) === JSON.stringify([...scopes].sort()), `token scope "${payload.scope}", wanted "${scopes.join(' ')}"`);
  if (sub) check(payload.sub === sub, `token sub ${payload.sub}, wanted ${sub}`);
  check(payload.exp > Date.now() / 1000, 'token already expired');
  return payload;
}

// ---- MCP over the SDK ------------------------------------------------------------------------
async function callSum(client) {
  const res = await client.callTool({ name: 'calculate_sum', arguments: { a: 2, b: 3 } }, undefined, { timeout: 30_000 });
  const text = res.content?.find((c) => c.type === 'text')?.text;
  check(!res.isError && text === '5', `calculate_sum {a:2,b:3} answered ${JSON.stringify(res)}`);
}
function newTransport(authProvider) {
  return new StreamableHTTPClientTransport(MCP_URL, { authProvider, fetch: tracingFetch });
}
async function connect(authProvider) {
  const client = new Client({ name: 'toolgate-e2e-oauth', version: '1.0.0' });
  await client.connect(newTransport(authProvider));
  return client;
}

/** A plain request with a given bearer token (or none), outside the SDK. */
async function rawInitialize(token) {
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token) headers.authorization = `Bearer ${token}`;
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
  const res = await fetch(MCP_URL, { method: 'POST', headers, body });
  await res.body?.cancel();
  return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '' };
}

// ---- the protected-resource metadata, as toolgate announces it -------------------------------
async function checkMetadata() {
  const { status, challenge } = await rawInitialize();
  check(status === 401, `POST /mcp without a token answered ${status}, wanted 401`);
  const p = challengeParams(challenge);
  check(/^Bearer /.test(challenge) && p.resource_metadata && !p.error, `401 challenge without resource_metadata or with an error: ${challenge}`);
  check(p.scope === 'mcp:tools', `401 challenge scope "${p.scope}", wanted "mcp:tools"`);
  const res = await fetch(p.resource_metadata);
  check(res.ok, `GET ${p.resource_metadata} answered ${res.status}`);
  const prm = await res.json();
  check(prm.resource === MCP_URL.href, `PRM resource ${prm.resource}, wanted ${MCP_URL.href}`);
  check(JSON.stringify(prm.authorization_servers) === JSON.stringify([ISSUER]), `PRM authorization_servers ${JSON.stringify(prm.authorization_servers)}, wanted ["${ISSUER}"]`);
  check(prm.scopes_supported?.includes('mcp:tools'), `PRM scopes_supported ${JSON.stringify(prm.scopes_supported)} lacks mcp:tools`);
  check(JSON.stringify(prm.bearer_methods_supported) === '["header"]', `PRM bearer_methods_supported ${JSON.stringify(prm.bearer_methods_supported)}`);
  out.passed.push('401 challenge and protected-resource metadata');
  return { metadataUrl: p.resource_metadata, prm };
}

// ---- providers -------------------------------------------------------------------------------
function clientCredentials(scope) {
  return new ClientCredentialsProvider({
    clientId: args['client-id'],
    clientSecret: args['client-secret'],
    clientName: 'toolgate-e2e-m2m',
    scope,
    expectedIssuer: ISSUER,
  });
}

/** Plays the user's browser: follows the authorization URL, keeping the AS's cookies, until the
 *  AS redirects to `redirectUrl`; answers that redirect's query parameters. */
async function userAgent(authorizationUrl, redirectUrl) {
  const jar = new Map();
  let url = new URL(authorizationUrl);
  for (let hop = 0; hop < 10; hop++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const eq = pair.indexOf('=');
      jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const location = res.headers.get('location');
    if (res.status < 300 || res.status > 399 || !location) {
      const body = await res.text().catch(() => '');
      throw new CheckFailed(`authorization stopped at ${url.origin}${url.pathname} with HTTP ${res.status}: ${body.slice(0, 300)}`);
    }
    await res.body?.cancel();
    const next = new URL(location, url);
    log(`user agent: ${url.pathname} -> ${res.status} ${next.origin}${next.pathname}`);
    if (`${next.origin}${next.pathname}` === redirectUrl) return next.searchParams;
    url = next;
  }
  throw new CheckFailed('authorization did not come back to the redirect URI within 10 redirects');
}

/** An interactive client as a desktop MCP client would implement it, with its "browser"
 *  automated: it registers dynamically, and redirectToAuthorization() completes the login. */
class InteractiveProvider {
  constructor() {
    this.redirect = 'http://127.0.0.1:8976/callback'; // never listened on: the code is read from the Location
    this._tokens = undefined;
    this._client = undefined;
    this._verifier = undefined;
    this._state = undefined;
    this.code = undefined;
    this.authorizationUrl = undefined;
  }
  get redirectUrl() { return this.redirect; }
  get clientMetadata() {
    return {
      client_name: 'toolgate-e2e-interactive',
      redirect_uris: [this.redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    this._state = Math.random().toString(36).slice(2);
    return this._state;
  }
  clientInformation() { return this._client; }
  saveClientInformation(info) { this._client = info; }
  tokens() { return this._tokens; }
  saveTokens(tokens) { this._tokens = tokens; }
  saveCodeVerifier(v) { this._verifier = v; }
  codeVerifier() { return this._verifier; }
  async redirectToAuthorization(url) {
    this.authorizationUrl = new URL(url);
    const params = await userAgent(url, this.redirect);
    check(!params.get('error'), `the AS answered error=${params.get('error')}: ${params.get('error_description')}`);
    check(params.get('state') === this._state, `state ${params.get('state')} came back, wanted ${this._state}`);
    check(params.get('iss') === ISSUER, `iss ${params.get('iss')} in the authorization response, wanted ${ISSUER} (RFC 9207)`);
    this.code = params.get('code');
    check(!!this.code, 'no code in the authorization response');
  }
}

/** Connects with an interactive provider: the first connect ends in UnauthorizedError after the
 *  authorization round trip, finishAuth() trades the code, the second connect succeeds. */
async function connectInteractive(provider) {
  const transport = newTransport(provider);
  const first = new Client({ name: 'toolgate-e2e-oauth', version: '1.0.0' });
  let error;
  try {
    await first.connect(transport);
  } catch (e) {
    error = e;
  }
  check(error instanceof UnauthorizedError, `the first connect should stop for authorization, got ${error ? error.message : 'a session'}`);
  check(provider.code, 'the SDK never sent the user to the authorization endpoint');
  await transport.finishAuth(provider.code);
  return connect(provider);
}

// ---- scenarios -------------------------------------------------------------------------------
async function clientCredentialsScenario() {
  const { metadataUrl, prm } = await checkMetadata();
  const provider = clientCredentials('mcp:tools');
  const client = await connect(provider);
  expectSequence([step.mcp401, step.prm(metadataUrl), step.asMeta, step.token, step.mcp200]);
  out.passed.push('SDK discovery: 401 -> PRM -> AS metadata -> token (client_credentials) -> 200');
  checkToken(provider.tokens().access_token, { aud: prm.resource, scopes: ['mcp:tools'], sub: args['client-id'] });
  out.passed.push('token: RS256 at+jwt, iss, aud = resource, scope mcp:tools');
  await callSum(client);
  out.passed.push('calculate_sum = 5');
  await client.close();
}

async function authorizationCodeScenario() {
  const { metadataUrl, prm } = await checkMetadata();
  const provider = new InteractiveProvider();
  const client = await connectInteractive(provider);
  expectSequence([step.mcp401, step.prm(metadataUrl), step.asMeta, step.register, step.token, step.mcp200]);
  const q = provider.authorizationUrl.searchParams;
  check(q.get('resource') === prm.resource, `authorization request resource=${q.get('resource')}, wanted ${prm.resource}`);
  check(q.get('scope') === 'mcp:tools', `authorization request scope=${q.get('scope')}, wanted mcp:tools (from the challenge)`);
  check(q.get('code_challenge_method') === 'S256' && q.get('code_challenge'), 'authorization request without PKCE S256');
  out.passed.push('SDK discovery: 401 -> PRM -> AS metadata -> registration -> authorize (PKCE, resource) -> token -> 200');
  const claims = checkToken(provider.tokens().access_token, { aud: prm.resource, scopes: ['mcp:tools'], sub: 'alice' });
  check(claims.client_id === provider.clientInformation().client_id, `token client_id ${claims.client_id} is not the registered client`);
  out.passed.push('token: RS256 at+jwt, iss, aud = resource, scope mcp:tools, sub alice, registered client_id');
  await callSum(client);
  out.passed.push('calculate_sum = 5');
  await client.close();
}

async function wrongResourceScenario() {
  const { prm } = await checkMetadata();
  const other = args['other-resource'];
  // The SDK's own auth() flow, but with the resource indicator replaced by another server's.
  const minting = clientCredentials('mcp:tools');
  minting.validateResourceURL = async () => new URL(other);
  check(await auth(minting, { serverUrl: MCP_URL, fetchFn: tracingFetch }) === 'AUTHORIZED', 'auth() did not authorize');
  const wrong = minting.tokens().access_token;
  checkToken(wrong, { aud: new URL(other).href, scopes: ['mcp:tools'] });
  out.passed.push(`AS minted a token for ${other}`);

  const { status, challenge } = await rawInitialize(wrong);
  const p = challengeParams(challenge);
  check(status === 401, `a token for ${other} got HTTP ${status} from toolgate, wanted 401`);
  check(p.error === 'invalid_token' && p.resource_metadata, `401 challenge: ${challenge}`);
  out.passed.push(`toolgate: 401 invalid_token for aud ${other} (${p.error_description})`);

  // An SDK client holding the wrong token recovers: 401 -> new token for toolgate's resource.
  const provider = clientCredentials('mcp:tools');
  provider.saveTokens({ access_token: wrong, token_type: 'Bearer', issuer: ISSUER });
  const mark = trace.length;
  const client = await connect(provider);
  expectSequence([step.mcp401, step.token, step.mcp200], mark);
  checkToken(provider.tokens().access_token, { aud: prm.resource, scopes: ['mcp:tools'] });
  await callSum(client);
  out.passed.push('SDK client with that token: 401 -> token for the right resource -> calculate_sum = 5');
  await client.close();
}

async function insufficientScopeScenario() {
  const { prm } = await checkMetadata();
  const minting = clientCredentials('mcp:other');
  check(await auth(minting, { serverUrl: MCP_URL, fetchFn: tracingFetch }) === 'AUTHORIZED', 'auth() did not authorize');
  const narrow = minting.tokens().access_token;
  checkToken(narrow, { aud: prm.resource, scopes: ['mcp:other'] });
  out.passed.push('AS minted a token for the resource with scope mcp:other only');

  const { status, challenge } = await rawInitialize(narrow);
  const p = challengeParams(challenge);
  check(status === 403, `a token without mcp:tools got HTTP ${status} from toolgate, wanted 403`);
  check(p.error === 'insufficient_scope', `403 challenge: ${challenge}`);
  const wanted = (p.scope ?? '').split(' ');
  check(wanted.includes('mcp:tools') && wanted.includes('mcp:other'), `403 challenge scope "${p.scope}" should keep mcp:other and add mcp:tools`);
  out.passed.push(`toolgate: 403 insufficient_scope, scope="${p.scope}"`);

  // The interactive SDK client holding that token steps up with the challenge's scope (SEP-835).
  const provider = new InteractiveProvider();
  provider.saveTokens({ access_token: narrow, token_type: 'Bearer', issuer: ISSUER });
  const mark = trace.length;
  const client = await connectInteractive(provider);
  expectSequence([step.mcp403, step.token, step.mcp200], mark);
  const asked = (provider.authorizationUrl.searchParams.get('scope') ?? '').split(' ').sort();
  check(JSON.stringify(asked) === JSON.stringify([...wanted].sort()), `step-up asked for scope "${asked.join(' ')}", wanted the challenge's "${p.scope}"`);
  checkToken(provider.tokens().access_token, { aud: prm.resource, scopes: wanted, sub: 'alice' });
  await callSum(client);
  out.passed.push(`SDK client with that token: 403 -> authorization for "${p.scope}" -> calculate_sum = 5`);
  await client.close();
}

const run = {
  'client-credentials': clientCredentialsScenario,
  'authorization-code': authorizationCodeScenario,
  'wrong-resource': wrongResourceScenario,
  'insufficient-scope': insufficientScopeScenario,
}[args.scenario];

const deadline = setTimeout(() => {
  out.errors.push(`timed out after ${args.timeout}s`);
  console.log(JSON.stringify(out));
  process.exit(1);
}, Number(args.timeout) * 1000);
try {
  await run();
} catch (e) {
  out.errors.push(e instanceof CheckFailed ? e.message : `${e?.name ?? 'Error'}: ${e?.message ?? e}`);
  if (!(e instanceof CheckFailed)) log(e?.stack ?? e);
}
clearTimeout(deadline);
console.log(JSON.stringify(out));
process.exit(out.errors.length === 0 ? 0 : 1);
