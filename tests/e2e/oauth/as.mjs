#!/usr/bin/env node
// A real OAuth 2.1 authorization server for tests/e2e/oauth.sh: npm oidc-provider (a certified
// OpenID Provider), exactly as pinned in tests/e2e/oauth/package-lock.json and installed by
// tests/e2e/setup.sh into $HARNESS_DIR/oauth-as (default ~/.cache/toolgate-e2e). Needs Node 22
// ($HARNESS_DIR/node22/node).
//
//   node tests/e2e/oauth/as.mjs [--port 0] [--token-format jwt|opaque] [--ttl 300]
//
// Listens on 127.0.0.1 only (port 0: any free port), and only then creates the provider, so the
// issuer is exactly http://127.0.0.1:<port> (no trailing slash, no path). The first line on
// stdout is one JSON object: {"issuer": "...", "port": N, "pid": N}; logs go to stderr.
//
// What it offers:
//   - resource indicators (RFC 8707): an access token is for exactly one resource (an absolute
//     http(s) URI without fragment), its `aud` is that URI, its scope is what was asked for
//     among RESOURCE_SCOPES; format JWT (typ at+jwt, RS256, key in /jwks) or, with
//     --token-format opaque, opaque (for introspection)
//   - clients (all pre-registered, besides dynamic registration):
//       mcp-m2m / mcp-m2m-secret       confidential, client_credentials (client_secret_basic/post)
//       mcp-public                     public (PKCE), authorization_code, redirect
//                                      http://127.0.0.1/callback (any loopback port, RFC 8252)
//       toolgate-introspect / toolgate-introspect-secret   may call the introspection endpoint
//   - dynamic client registration (RFC 7591), open, as MCP clients use it
//   - authorization code + PKCE (S256) with automated login and consent: /interaction/<uid>
//     logs in the account "alice" and grants every scope the request asked for, then redirects
//     back; no browser and no form, but the interaction cookies must be returned like a browser
//     would
//   - token introspection (RFC 7662) for the toolgate-introspect client, revocation
//
// Discovery: /.well-known/openid-configuration (oidc-provider does not serve the RFC 8414
// /.well-known/oauth-authorization-server document; clients fall back to the OIDC one).
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    port: { type: 'string', default: '0' },
    'token-format': { type: 'string', default: 'jwt' },
    ttl: { type: 'string', default: '300' },
  },
});
if (!['jwt', 'opaque'].includes(args['token-format']) || !/^\d+$/.test(args.port) || !/^\d+$/.test(args.ttl)) {
  console.error('usage: as.mjs [--port N] [--token-format jwt|opaque] [--ttl SECONDS]');
  process.exit(2);
}

const HARNESS_DIR = process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e');
const OIDC = path.join(HARNESS_DIR, 'oauth-as', 'node_modules', 'oidc-provider', 'lib', 'index.js');
const { default: Provider, errors } = await import(pathToFileURL(OIDC).href);

/** Scopes a resource server (any resource indicator) can be granted. */
const RESOURCE_SCOPES = ['mcp:tools', 'mcp:other'];
const ACCOUNT = 'alice';
const log = (...m) => console.error('[oauth-as]', ...m);

// The server exists before the provider so that the issuer can carry the real port.
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

// A fresh RS256 signing key per run; toolgate finds it through discovery -> jwks_uri.
const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: `rs256-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' };

function resourceAllowed(indicator) {
  const url = URL.parse(indicator);
  return !!url && ['http:', 'https:'].includes(url.protocol) && !url.hash && !indicator.includes('#');
}

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'mcp-m2m',
      client_secret: 'mcp-m2m-secret',
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    },
    {
      client_id: 'mcp-public',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    },
    {
      client_id: 'toolgate-introspect',
      client_secret: 'toolgate-introspect-secret',
      grant_types: [],
      response_types: [],
      redirect_uris: [],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  // Scopes clients may register and request; the resource scopes are listed so that dynamic
  // registration with scope "mcp:tools" is accepted.
  scopes: ['openid', 'offline_access', ...RESOURCE_SCOPES],
  claims: { openid: ['sub'] },
  findAccount: (_ctx, id) => ({ accountId: id, claims: () => ({ sub: id }) }),
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    introspection: {
      enabled: true,
      allowedPolicy: (_ctx, client) => client.clientId === 'toolgate-introspect',
    },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      // No resource requested: no resource-bound token (the MCP SDKs always send one).
      defaultResource: () => undefined,
      // The token endpoint may omit `resource` when the authorization request had one.
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, indicator) => {
        if (!resourceAllowed(indicator)) throw new errors.InvalidTarget();
        return {
          scope: RESOURCE_SCOPES.join(' '),
          audience: indicator,
          accessTokenTTL: Number(args.ttl),
          accessTokenFormat: args['token-format'],
          ...(args['token-format'] === 'jwt' ? { jwt: { sign: { alg: 'RS256' } } } : {}),
        };
      },
    },
  },
  ttl: {
    AccessToken: Number(args.ttl),
    ClientCredentials: Number(args.ttl),
    AuthorizationCode: 60,
    IdToken: 600,
    Interaction: 600,
    Session: 3600,
    Grant: 3600,
    RefreshToken: 3600,
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
});
provider.on('server_error', (_ctx, err) => log('server_error', err));
provider.on('grant.error', (_ctx, err) => log('grant.error', err.message, err.error_description ?? ''));
provider.on('authorization.error', (_ctx, err) => log('authorization.error', err.message, err.error_description ?? ''));
provider.on('registration_create.error', (_ctx, err) => log('registration.error', err.message, err.error_description ?? ''));

// The "user": logs in as alice, then consents to everything that is missing.
async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, session } = details;
  if (prompt.name === 'login') {
    log(`interaction ${details.uid}: login as ${ACCOUNT} for client ${params.client_id}`);
    await provider.interactionFinished(req, res, { login: { accountId: ACCOUNT } }, { mergeWithLastSubmission: false });
    return;
  }
  if (prompt.name === 'consent') {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
    if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const grantId = await grant.save();
    log(`interaction ${details.uid}: consent for client ${params.client_id}: ${JSON.stringify(missingResourceScopes ?? {})}`);
    await provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
    return;
  }
  throw new Error(`unexpected prompt ${prompt.name}`);
}

const callback = provider.callback();
handler = (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((err) => {
      log('interaction failed:', err);
      if (!res.headersSent) {
        res.statusCode = 400;
        res.setHeader('content-type', 'text/plain');
      }
      res.end(`interaction failed: ${err.message}\n`);
    });
    return;
  }
  callback(req, res);
};

const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
console.log(JSON.stringify({ issuer, port, pid: process.pid, tokenFormat: args['token-format'] }));
log(`${issuer} ready (oidc-provider, ${args['token-format']} access tokens, RS256 kid ${signingKey.kid})`);
