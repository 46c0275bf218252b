#!/usr/bin/env node
// The authorization server of the "notes" SaaS service for tests/e2e/connect.sh: npm oidc-provider
// (exactly as pinned in tests/e2e/oauth/package-lock.json, installed by tests/e2e/setup.sh,
// component oauth-as; runs on $HARNESS_DIR/node22/node). A separate instance from toolgate's own
// identity provider (tests/e2e/oauth/idp.mjs), configured the way a SaaS provider (GitHub,
// Atlassian) treats an integration that acts on its users' accounts:
//
//   node tests/e2e/connect/notes_as.mjs --resource http://127.0.0.1:U/mcp
//        --redirect-uri http://127.0.0.1:T/oauth/vault/callback/notes --client-secret S
//        --rs-secret R [--client-id toolgate-notes] [--access-ttl 20] [--port 0]
//
//   - no dynamic registration; one pre-registered confidential client for toolgate
//     (--client-id, client_secret_basic): grant types authorization_code + refresh_token +
//     client_credentials, redirect URI exactly --redirect-uri, PKCE required
//   - the notes API (--resource, RFC 8707 resource indicators): its only scope is `notes`; only
//     toolgate's client gets tokens for it, opaque, --access-ttl seconds (default 20, so that
//     a refresh happens during a test); every token of the authorization code and refresh grants
//     is for exactly that resource (a token request may omit `resource` once the authorization
//     request named it); a client-credentials token must name it
//   - refresh tokens for every code grant (no offline_access needed, as GitHub and Atlassian
//     hand them out), rotated on every use; a rotated-out refresh token presented again is
//     refused (invalid_grant) and oidc-provider revokes the whole grant, as OAuth 2.1 section
//     4.3.1 asks
//   - users log in through oidc-provider's development pages in the browser: a login form (any
//     login, any password; the login is the account's sub) and a consent page ("Continue")
//   - introspection (RFC 7662, /token/introspection) for the notes API server's own client
//     notes-rs / --rs-secret only; revocation (RFC 7009)
//
// Listens on 127.0.0.1 only; the issuer is exactly http://127.0.0.1:<port>. The first line on
// stdout is {"issuer": "...", "port": N, "pid": N}. On stderr, among oidc-provider's events:
//   [notes-as] authorize {...}  one per authorization request: client, scope, redirect_uri, PKCE
//                               method, state present, resource
//   [notes-as] token {...}      one per token request: grant type, client, client authentication,
//                               resource, scope, HTTP status, error; `spent`: sha256 prefix (16 hex)
//                               of the refresh token presented (refresh grant); `issued_at` /
//                               `issued_rt`: the same digest of the access / refresh token issued
//   [notes-as] introspect {...} one per introspection: digest of the token, active, client, sub, aud
// Never a token or secret itself.
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    resource: { type: 'string' },
    'redirect-uri': { type: 'string', multiple: true, default: [] },
    'client-id': { type: 'string', default: 'toolgate-notes' },
    'client-secret': { type: 'string' },
    'rs-secret': { type: 'string' },
    'access-ttl': { type: 'string', default: '20' },
  },
});
if (!/^\d+$/.test(args.port) || !/^\d+$/.test(args['access-ttl']) || !args.resource || !args['redirect-uri'].length
  || !args['client-secret'] || !args['rs-secret']) {
  console.error('usage: notes_as.mjs --resource URL --redirect-uri URL --client-secret S --rs-secret R [--client-id ID] [--access-ttl 20] [--port 0]');
  process.exit(2);
}

const HARNESS_DIR = process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e');
const OIDC = path.join(HARNESS_DIR, 'oauth-as', 'node_modules', 'oidc-provider', 'lib', 'index.js');
const { default: Provider, errors } = await import(pathToFileURL(OIDC).href);
const log = (...m) => console.error('[notes-as]', ...m);
const digest = (t) => (typeof t === 'string' && t ? createHash('sha256').update(t).digest('hex').slice(0, 16) : null);

const CLIENT = args['client-id'];
const RESOURCE = args.resource;
const TTL = Number(args['access-ttl']);

let handler = (_req, res) => {
  res.statusCode = 503;
  res.end();
};
const server = createServer((req, res) => handler(req, res));
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(args.port), '127.0.0.1', resolve);
});
const { port } = server.address();
const issuer = `http://127.0.0.1:${port}`;

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: `notes-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: CLIENT,
      client_secret: args['client-secret'],
      client_name: 'toolgate (MCP gateway)',
      grant_types: ['authorization_code', 'refresh_token', 'client_credentials'],
      response_types: ['code'],
      redirect_uris: args['redirect-uri'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      // the notes API server itself: introspection only
      client_id: 'notes-rs',
      client_secret: args['rs-secret'],
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [signingKey] },
  // Cookies are not told apart by port: on 127.0.0.1 oidc-provider's default names would replace
  // those of toolgate's identity provider (tests/e2e/oauth/idp.mjs) in the same browser.
  cookies: {
    keys: [randomBytes(32).toString('base64url')],
    names: { session: '_notes_session', interaction: '_notes_interaction', resume: '_notes_interaction_resume' },
  },
  scopes: ['openid', 'offline_access', 'notes'],
  claims: { openid: ['sub'] },
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  pkce: { required: () => true },
  // GitHub / Atlassian style: a refresh token with every code grant, rotated at every use, not
  // tied to the browser session at the provider.
  issueRefreshToken: (_ctx, client) => client.grantTypeAllowed('refresh_token'),
  rotateRefreshToken: () => true,
  expiresWithSession: () => false,
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true, allowedPolicy: (_ctx, client) => client.clientId === 'notes-rs' },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator, client) => {
        if (indicator !== RESOURCE) throw new errors.InvalidTarget(`unknown resource ${indicator} (this server knows ${RESOURCE})`);
        if (client?.clientId !== CLIENT) throw new errors.InvalidTarget(`only ${CLIENT} gets tokens for ${RESOURCE}`);
        return { scope: 'notes', audience: RESOURCE, accessTokenTTL: TTL, accessTokenFormat: 'opaque' };
      },
    },
  },
  ttl: {
    AccessToken: TTL,
    ClientCredentials: TTL,
    AuthorizationCode: 60,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
    RefreshToken: 3600,
  },
});
provider.on('server_error', (_ctx, err) => log('server_error', err));
provider.on('authorization.error', (_ctx, err) => log('authorization.error', err.message, err.error_description ?? ''));
provider.on('grant.error', (_ctx, err) => log('grant.error', err.message, err.error_description ?? ''));
provider.on('grant.revoked', (_ctx, grantId) => log('grant.revoked', grantId));
provider.on('interaction.started', (ctx, prompt) => log('interaction.started', prompt.name, ctx.oidc.client?.clientId));
provider.on('interaction.ended', (ctx) => log('interaction.ended', ctx.oidc.client?.clientId));

provider.use(async (ctx, next) => {
  if (ctx.path === '/auth' && ctx.method === 'GET' && ctx.query.client_id) {
    const q = ctx.query;
    log('authorize', JSON.stringify({
      client_id: q.client_id, scope: q.scope ?? null, response_type: q.response_type, redirect_uri: q.redirect_uri,
      code_challenge_method: q.code_challenge_method ?? null, pkce: !!q.code_challenge, state: !!q.state,
      resource: q.resource ?? null, prompt: q.prompt ?? null,
    }));
  }
  await next();
  if (ctx.path === '/token' && ctx.method === 'POST') {
    const p = { ...(ctx.oidc?.body ?? {}), ...(ctx.oidc?.params ?? {}) };
    const basic = /^basic /i.test(ctx.get('authorization'));
    const body = ctx.body && typeof ctx.body === 'object' ? ctx.body : {};
    log('token', JSON.stringify({
      grant_type: p.grant_type ?? null,
      client_id: ctx.oidc?.client?.clientId ?? null,
      client_auth: basic ? 'client_secret_basic' : (ctx.oidc?.body?.client_secret ? 'client_secret_post' : 'none'),
      pkce: !!p.code_verifier,
      resource: p.resource ?? null,
      scope: p.scope ?? null,
      status: ctx.status,
      error: body.error ?? null,
      error_description: body.error_description ?? null,
      spent: p.grant_type === 'refresh_token' ? digest(ctx.oidc?.body?.refresh_token) : null,
      issued_at: digest(body.access_token),
      issued_rt: digest(body.refresh_token),
      expires_in: body.expires_in ?? null,
      granted_scope: body.scope ?? null,
      t: Date.now(),
    }));
  }
  if (ctx.path === '/token/introspection' && ctx.method === 'POST') {
    const body = ctx.body && typeof ctx.body === 'object' ? ctx.body : {};
    log('introspect', JSON.stringify({
      token: digest(ctx.oidc?.body?.token ?? ctx.oidc?.params?.token), caller: ctx.oidc?.client?.clientId ?? null,
      status: ctx.status, active: body.active ?? null, client_id: body.client_id ?? null, sub: body.sub ?? null,
      aud: body.aud ?? null, scope: body.scope ?? null, t: Date.now(),
    }));
  }
});

handler = provider.callback();
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
console.log(JSON.stringify({ issuer, port, pid: process.pid }));
log(`${issuer} ready (oidc-provider; client ${CLIENT} -> ${args['redirect-uri'].join(' ')}; resource ${RESOURCE}, scope notes, opaque access tokens for ${TTL} s, refresh tokens rotated)`);
