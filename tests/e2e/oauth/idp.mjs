#!/usr/bin/env node
// The organization's OpenID Connect provider for tests/e2e/signin.sh and tests/cluster/signin.sh,
// the identity provider that toolgate's own authorization server signs users in at: npm
// oidc-provider (a certified OpenID Provider), exactly as pinned in tests/e2e/oauth/package-lock.json
// and installed by tests/e2e/setup.sh (component oauth-as). Needs Node 22 ($HARNESS_DIR/node22/node).
//
//   node tests/e2e/oauth/idp.mjs --redirect-uri http://127.0.0.1:P/oauth/callback --client-secret S
//                                [--port 0] [--reject-resource]
//
// Configured like an enterprise provider (Entra ID, Okta's org server, Google):
//   - no dynamic registration: exactly one client, toolgate's, registered in advance: confidential
//     (client_secret_basic), authorization code only, PKCE required, redirect URI(s) exactly as given
//   - users sign in through oidc-provider's development interactions, in a real browser: a login
//     form (any login and password; the login is the account id) and then a consent page
//     ("Continue"); an account's claims: sub = the login, email <login>@example.com (verified),
//     name, groups ["mcp-users", "staff"]; the ID token carries them (as Entra ID puts email and
//     groups in its ID tokens)
//   - --reject-resource: RFC 8707's `resource` refused as Entra ID refuses it (AADSTS901002,
//     AADSTS9010010): an authorization request with `resource` is answered with invalid_target, and
//     so is a token request
//
// Listens on 127.0.0.1 only (port 0: any free port); the issuer is exactly http://127.0.0.1:<port>.
// The first line on stdout is {"issuer": "...", "port": N, "pid": N}. Logs go to stderr, among them
// one `[idp] authorize {...}` line per authorization request (client, scope, redirect_uri, PKCE
// method, whether it had a nonce and a resource) and one `[idp] token {...}` line per token request
// (grant type, client authentication, whether it had a resource, status), never a secret or token.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'redirect-uri': { type: 'string', multiple: true, default: [] },
    'client-id': { type: 'string', default: 'toolgate' },
    'client-secret': { type: 'string' },
    'reject-resource': { type: 'boolean', default: false },
  },
});
if (!/^\d+$/.test(args.port) || !args['redirect-uri'].length || !args['client-secret']) {
  console.error('usage: idp.mjs --redirect-uri URL [--redirect-uri URL]... --client-secret S [--client-id toolgate] [--port N] [--reject-resource]');
  process.exit(2);
}

const HARNESS_DIR = process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e');
const OIDC = path.join(HARNESS_DIR, 'oauth-as', 'node_modules', 'oidc-provider', 'lib', 'index.js');
const { default: Provider, errors } = await import(pathToFileURL(OIDC).href);
const log = (...m) => console.error('[idp]', ...m);

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
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: `idp-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' };

const AADSTS901002 = "AADSTS901002: The 'resource' request parameter is not supported.";

const provider = new Provider(issuer, {
  clients: [{
    client_id: args['client-id'],
    client_secret: args['client-secret'],
    client_name: 'toolgate (MCP gateway)',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: args['redirect-uri'],
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  scopes: ['openid', 'offline_access', 'email', 'profile'],
  claims: { openid: ['sub', 'groups'], email: ['email', 'email_verified'], profile: ['name'] },
  // The ID token carries the claims of the scopes asked for (not only the userinfo endpoint).
  conformIdTokenClaims: false,
  findAccount: (_ctx, id) => ({
    accountId: id,
    claims: () => ({
      sub: id,
      email: `${id.replace(/@.*$/, '')}@example.com`,
      email_verified: true,
      name: `${id} (e2e)`,
      groups: ['mcp-users', 'staff'],
    }),
  }),
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    registration: { enabled: false },
    revocation: { enabled: true },
    // Off: an unknown `resource` is ignored, as Okta's org server and Google do. With
    // --reject-resource: on, and every resource refused, as Entra ID does.
    resourceIndicators: {
      enabled: args['reject-resource'],
      defaultResource: () => undefined,
      useGrantedResource: () => false,
      getResourceServerInfo: () => {
        throw new errors.InvalidTarget(AADSTS901002);
      },
    },
  },
  ttl: { AccessToken: 300, AuthorizationCode: 60, IdToken: 600, Interaction: 600, Session: 3600, Grant: 3600, RefreshToken: 3600 },
});
provider.on('server_error', (_ctx, err) => log('server_error', err));
provider.on('authorization.error', (_ctx, err) => log('authorization.error', err.message, err.error_description ?? ''));
provider.on('grant.error', (_ctx, err) => log('grant.error', err.message, err.error_description ?? ''));
provider.on('grant.success', (ctx) => log('grant.success', ctx.oidc.params?.grant_type, ctx.oidc.client?.clientId));
provider.on('interaction.started', (ctx, prompt) => log('interaction.started', prompt.name, ctx.oidc.client?.clientId));
provider.on('interaction.ended', (ctx) => log('interaction.ended', ctx.oidc.client?.clientId));

// What toolgate asked for, one line per request (the checks of signin.sh read these lines).
provider.use(async (ctx, next) => {
  if (ctx.path === '/auth' && ctx.method === 'GET' && ctx.query.client_id) {
    const q = ctx.query;
    log('authorize', JSON.stringify({
      client_id: q.client_id, scope: q.scope, response_type: q.response_type, redirect_uri: q.redirect_uri,
      code_challenge_method: q.code_challenge_method, pkce: !!q.code_challenge, nonce: !!q.nonce, state: !!q.state,
      resource: q.resource ?? null, response_mode: q.response_mode ?? null, prompt: q.prompt ?? null,
      rejected: args['reject-resource'] && q.resource !== undefined ? 'invalid_target' : null,
    }));
  }
  await next();
  if (ctx.path === '/token' && ctx.method === 'POST') {
    const p = { ...(ctx.oidc?.body ?? {}), ...(ctx.oidc?.params ?? {}) };
    const basic = /^basic /i.test(ctx.get('authorization'));
    log('token', JSON.stringify({
      grant_type: p.grant_type ?? null, client_auth: basic ? 'client_secret_basic' : (ctx.oidc?.body?.client_secret ? 'client_secret_post' : 'none'),
      client_id: ctx.oidc?.client?.clientId ?? null, pkce: !!p.code_verifier, resource: p.resource ?? null, status: ctx.status,
    }));
  }
});

handler = provider.callback();
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
console.log(JSON.stringify({ issuer, port, pid: process.pid, rejectResource: args['reject-resource'] }));
log(`${issuer} ready (oidc-provider; one client "${args['client-id']}" -> ${args['redirect-uri'].join(' ')}; no dynamic registration; resource ${args['reject-resource'] ? 'refused (invalid_target)' : 'ignored'})`);
