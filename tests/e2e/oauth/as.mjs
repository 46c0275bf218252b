#!/usr/bin/env node
// A real OAuth 2.1 authorization server for tests/e2e/oauth.sh and tests/e2e/upstream_oauth.sh:
// npm oidc-provider (a certified OpenID Provider), exactly as pinned in
// tests/e2e/oauth/package-lock.json and installed by tests/e2e/setup.sh into
// $HARNESS_DIR/oauth-as (default ~/.cache/toolgate-e2e). Needs Node 22 ($HARNESS_DIR/node22/node).
//
//   node tests/e2e/oauth/as.mjs [--port 0] [--token-format jwt|opaque] [--ttl 300] [--upstream URL]...
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
//       mcp-m2m-2 / mcp-m2m-2-secret   the same, a second subject
//       mcp-m2m-no-exchange / mcp-m2m-no-exchange-secret   the same, a subject whose tokens may
//                                      not be exchanged (see token exchange below)
//       toolgate / TOOLGATE_SECRET     toolgate as an upstream's client: client_secret_basic,
//                                      client_credentials and token exchange, for the --upstream
//                                      resources only (the secret has characters that HTTP Basic
//                                      must form-encode, RFC 6749 section 2.3.1)
//       mcp-public                     public (PKCE), authorization_code, redirect
//                                      http://127.0.0.1/callback (any loopback port, RFC 8252)
//       toolgate-introspect / toolgate-introspect-secret   may call the introspection endpoint
//   - dynamic client registration (RFC 7591), open, as MCP clients use it
//   - authorization code + PKCE (S256) with automated login and consent: /interaction/<uid>
//     logs in the account "alice" and grants every scope the request asked for, then redirects
//     back; no browser and no form, but the interaction cookies must be returned like a browser
//     would
//   - token introspection (RFC 7662) for the toolgate-introspect client, revocation
//   - upstream resources (--upstream URL, repeatable): MCP servers behind toolgate. Their only
//     scope is upstream:tools; only the toolgate client gets tokens for them, and toolgate gets
//     no tokens for anything else. `audience` stands for `resource` at the token endpoint when
//     no resource is given (toolgate names the upstream with `audience`)
//   - token exchange (RFC 8693, grant_type urn:ietf:params:oauth:grant-type:token-exchange), for
//     the toolgate client: subject_token must be an access token this server issued and that is
//     still valid (a JWT: signature with this run's key, typ at+jwt, iss, exp; opaque: looked up),
//     subject_token_type and requested_token_type (if given) access_token; exactly one target
//     (audience or resource); every requested scope must be the target's, else invalid_scope.
//     The token issued is for the target (aud), with the subject token's sub, client_id toolgate,
//     and act {sub: "toolgate"} (RFC 8693 section 4.1; nested when the subject token had one).
//     Subjects in NO_DELEGATION (mcp-m2m-no-exchange) are refused with invalid_grant.
//   - every token issued is logged on stderr as one `[oauth-as] issued {...}` line (grant type,
//     client and, for a JWT, its claims; never the token)
//
// Discovery: /.well-known/openid-configuration (oidc-provider does not serve the RFC 8414
// /.well-known/oauth-authorization-server document; clients fall back to the OIDC one).
import { generateKeyPairSync, randomBytes, verify } from 'node:crypto';
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
    upstream: { type: 'string', multiple: true, default: [] },
  },
});
if (
  !['jwt', 'opaque'].includes(args['token-format']) || !/^\d+$/.test(args.port) || !/^\d+$/.test(args.ttl)
  || !args.upstream.every(resourceAllowed)
) {
  console.error('usage: as.mjs [--port N] [--token-format jwt|opaque] [--ttl SECONDS] [--upstream URL]...');
  process.exit(2);
}

const HARNESS_DIR = process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e');
const OIDC = path.join(HARNESS_DIR, 'oauth-as', 'node_modules', 'oidc-provider', 'lib', 'index.js');
const { default: Provider, errors } = await import(pathToFileURL(OIDC).href);

/** Scopes a resource server (any resource indicator but an upstream) can be granted. */
const RESOURCE_SCOPES = ['mcp:tools', 'mcp:other'];
/** The resources of --upstream, and the scopes they can be granted. */
const UPSTREAMS = new Set(args.upstream);
const UPSTREAM_SCOPES = ['upstream:tools'];
/** toolgate as the upstreams' client; its secret needs form-encoding in HTTP Basic. */
const TOOLGATE_CLIENT = 'toolgate';
const TOOLGATE_SECRET = 'toolgate secret:+/&=%';
/** Subjects whose tokens are never exchanged: refused with invalid_grant. */
const NO_DELEGATION = new Set(['mcp-m2m-no-exchange']);
const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
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
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: `rs256-${randomBytes(4).toString('hex')}`, alg: 'RS256', use: 'sig' };

function resourceAllowed(indicator) {
  const url = URL.parse(indicator);
  return !!url && ['http:', 'https:'].includes(url.protocol) && !url.hash && !indicator.includes('#');
}

/** What a token for the resource `indicator` is (audience, scopes, format), for `client`. */
function resourceServerInfo(_ctx, indicator, client) {
  if (!resourceAllowed(indicator)) throw new errors.InvalidTarget();
  const upstream = UPSTREAMS.has(indicator);
  if (upstream && client?.clientId !== TOOLGATE_CLIENT) {
    throw new errors.InvalidTarget(`only the ${TOOLGATE_CLIENT} client gets tokens for the upstream ${indicator}`);
  }
  if (!upstream && client?.clientId === TOOLGATE_CLIENT) {
    throw new errors.InvalidTarget(`${indicator} is not an upstream: the ${TOOLGATE_CLIENT} client gets tokens for upstreams only`);
  }
  return {
    scope: (upstream ? UPSTREAM_SCOPES : RESOURCE_SCOPES).join(' '),
    audience: indicator,
    accessTokenTTL: Number(args.ttl),
    accessTokenFormat: args['token-format'],
    ...(args['token-format'] === 'jwt' ? { jwt: { sign: { alg: 'RS256' } } } : {}),
  };
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
    ...['mcp-m2m-2', 'mcp-m2m-no-exchange'].map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
    })),
    {
      client_id: TOOLGATE_CLIENT,
      client_secret: TOOLGATE_SECRET,
      grant_types: ['client_credentials', TOKEN_EXCHANGE],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
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
      // No resource requested: no resource-bound token (the MCP SDKs always send one), unless a
      // client-credentials request names its target with `audience` instead (as toolgate does).
      defaultResource: (ctx) => {
        const audience = ctx.oidc.body?.audience;
        const cc = ctx.oidc.route === 'token' && ctx.oidc.params?.grant_type === 'client_credentials';
        return cc && typeof audience === 'string' ? audience : undefined;
      },
      // The token endpoint may omit `resource` when the authorization request had one.
      useGrantedResource: () => true,
      getResourceServerInfo: resourceServerInfo,
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
  // The actor of an exchanged token (RFC 8693 section 4.1); nothing for any other token.
  extraTokenClaims: (_ctx, token) => (actors.has(token) ? { act: actors.get(token) } : undefined),
});
provider.registerGrantType(TOKEN_EXCHANGE, tokenExchange, [
  'subject_token', 'subject_token_type', 'actor_token', 'actor_token_type', 'requested_token_type',
  'audience', 'resource', 'scope',
], ['audience', 'resource']);
provider.on('server_error', (_ctx, err) => log('server_error', err));
provider.on('grant.error', (_ctx, err) => log('grant.error', err.message, err.error_description ?? ''));
provider.on('authorization.error', (_ctx, err) => log('authorization.error', err.message, err.error_description ?? ''));
provider.on('registration_create.error', (_ctx, err) => log('registration.error', err.message, err.error_description ?? ''));
provider.on('grant.success', (ctx) => {
  const { access_token: token, token_type: type } = ctx.body ?? {};
  const claims = typeof token === 'string' && token.split('.').length === 3 ? decodeJwt(token)?.payload : undefined;
  const { sub, aud, scope, act, client_id: clientId } = claims ?? {};
  log('issued', JSON.stringify({ grant_type: ctx.oidc.params.grant_type, client: ctx.oidc.client?.clientId, token_type: type, sub, aud, scope, act, client_id: clientId }));
});

// ---- token exchange (RFC 8693) ----------------------------------------------------------------
/** The `act` claim of each exchanged token while it is being issued (read by extraTokenClaims). */
const actors = new WeakMap();
const refuse = (error, description) => new errors.CustomOIDCProviderError(error, description);

function decodeJwt(token) {
  try {
    const [header, payload] = token.split('.', 2).map((part) => JSON.parse(Buffer.from(part, 'base64url').toString('utf8')));
    return { header, payload };
  } catch {
    return undefined;
  }
}

/** The claims of a subject token, if it is a still valid access token of this server; else invalid_grant. */
async function verifySubjectToken(token) {
  const parts = token.split('.');
  if (parts.length === 3) {
    const { header, payload } = decodeJwt(token) ?? {};
    const signed = header && verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), publicKey, Buffer.from(parts[2], 'base64url'));
    if (!signed || header.alg !== 'RS256' || header.kid !== signingKey.kid) {
      throw refuse('invalid_grant', 'subject_token is not an access token of this authorization server (signature)');
    }
    if (header.typ !== 'at+jwt') throw refuse('invalid_grant', `subject_token is not an access token (typ ${header.typ})`);
    if (payload?.iss !== issuer) throw refuse('invalid_grant', `subject_token was issued by ${payload?.iss}, not ${issuer}`);
    if (!(payload.exp > Date.now() / 1000)) throw refuse('invalid_grant', 'subject_token has expired');
    if (typeof payload.sub !== 'string' || !payload.sub) throw refuse('invalid_grant', 'subject_token has no sub');
    return payload;
  }
  // opaque (--token-format opaque): one of ours only if it is stored and unexpired
  const found = (await provider.AccessToken.find(token)) ?? (await provider.ClientCredentials.find(token));
  if (!found?.isValid) throw refuse('invalid_grant', 'subject_token is not a valid access token of this authorization server');
  return { sub: found.accountId ?? found.clientId, ...found.extra };
}

async function tokenExchange(ctx) {
  const { client, params } = ctx.oidc; // the client is already authenticated, and allowed this grant
  if (!params.subject_token) throw new errors.InvalidRequest('missing required parameter subject_token');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`subject_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw new errors.InvalidRequest(`requested_token_type must be ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.actor_token !== undefined) {
    throw new errors.InvalidRequest('actor_token is not supported: the authenticated client is the actor');
  }
  const subject = await verifySubjectToken(params.subject_token);
  if (NO_DELEGATION.has(subject.sub)) {
    throw refuse('invalid_grant', `the tokens of ${subject.sub} may not be exchanged (no delegation to ${client.clientId})`);
  }
  const targets = [...new Set([params.audience ?? [], params.resource ?? []].flat())];
  if (targets.length !== 1) throw new errors.InvalidTarget('name exactly one target (audience or resource)');
  const [target] = targets;
  if (!resourceAllowed(target)) throw new errors.InvalidTarget(`${target} is not an absolute http(s) URI`);
  const info = resourceServerInfo(ctx, target, client);
  const offered = new Set(info.scope.split(' '));
  const requested = params.scope ? params.scope.split(' ').filter(Boolean) : [...offered];
  const refused = requested.filter((s) => !offered.has(s));
  if (refused.length) {
    throw new errors.InvalidScope(`${refused.join(' ')} cannot be granted for ${target} (it offers ${[...offered].join(' ')})`, refused.join(' '));
  }
  const at = new provider.AccessToken({ accountId: subject.sub, client, gty: TOKEN_EXCHANGE, scope: requested.join(' ') });
  at.resourceServer = new provider.ResourceServer(target, info);
  actors.set(at, { sub: client.clientId, ...(subject.act ? { act: subject.act } : {}) });
  ctx.oidc.entity('AccessToken', at);
  const value = await at.save();
  ctx.body = {
    access_token: value,
    issued_token_type: ACCESS_TOKEN_TYPE,
    token_type: at.tokenType,
    expires_in: at.expiration,
    scope: at.scope,
  };
}

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
