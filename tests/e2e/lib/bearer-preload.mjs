// Node preload: `node --import tests/e2e/lib/bearer-preload.mjs …`.
//
// The MCP conformance suite takes only a URL, with no way to send an Authorization header.
// This preload installs a global undici dispatcher that adds `Authorization: Bearer
// $MCP_TOKEN` to every request for the origin of $MCP_URL that has none; Node's fetch() and
// undici.request() both go through it. Requests to any other origin are left alone, so the
// token never leaves for another host.
//
// Some scenarios send raw node:http requests instead, so http.request/http.get are wrapped the
// same way. undici (>= 7) is loaded from the conformance suite's own node_modules ($UNDICI_FROM).
import http from 'node:http';
import { createRequire, syncBuiltinESMExports } from 'node:module';

const token = process.env.MCP_TOKEN;
const target = process.env.MCP_URL;
const from = process.env.UNDICI_FROM;

if (token && target && from) {
  const { Agent, setGlobalDispatcher } = createRequire(from)('undici');
  const origin = new URL(target).origin;

  const names = (headers) => {
    if (!headers) return [];
    if (Array.isArray(headers)) {
      return typeof headers[0] === 'string' ? headers.filter((_, i) => i % 2 === 0) : headers.map(([k]) => k);
    }
    if (typeof headers[Symbol.iterator] === 'function') return [...headers].map(([k]) => k);
    return Object.keys(headers);
  };

  const withToken = (headers) => {
    const value = `Bearer ${token}`;
    if (!headers) return { authorization: value };
    if (Array.isArray(headers)) {
      return typeof headers[0] === 'string' || headers.length === 0 ? [...headers, 'authorization', value] : [...headers, ['authorization', value]];
    }
    if (typeof headers[Symbol.iterator] === 'function') return { ...Object.fromEntries(headers), authorization: value };
    return { ...headers, authorization: value };
  };

  class BearerAgent extends Agent {
    dispatch(options, handler) {
      let sameOrigin = false;
      try {
        sameOrigin = new URL(String(options.origin)).origin === origin;
      } catch {
        sameOrigin = false;
      }
      const hasAuth = names(options.headers).some((k) => String(k).toLowerCase() === 'authorization');
      return super.dispatch(sameOrigin && !hasAuth ? { ...options, headers: withToken(options.headers) } : options, handler);
    }
  }

  setGlobalDispatcher(new BearerAgent());

  // node:http: request(url[, options][, cb]) or request(options[, cb]).
  const server = new URL(origin);
  const serverPort = server.port || '80';
  const wrap = (original) =>
    function (...args) {
      const url = typeof args[0] === 'string' || args[0] instanceof URL ? new URL(String(args[0])) : null;
      const optionsIndex = url ? (typeof args[1] === 'object' && args[1] !== null ? 1 : -1) : 0;
      const options = optionsIndex >= 0 ? { ...args[optionsIndex] } : {};
      const host = url ? url.hostname : options.hostname ?? options.host ?? 'localhost';
      const port = String(url ? url.port || '80' : options.port ?? '80');
      if (host === server.hostname && port === serverPort) {
        const headers = { ...(options.headers ?? {}) };
        if (!Object.keys(headers).some((k) => k.toLowerCase() === 'authorization')) headers.authorization = `Bearer ${token}`;
        options.headers = headers;
        if (optionsIndex >= 0) args[optionsIndex] = options;
        else args.splice(1, 0, options);
      }
      return original.apply(this, args);
    };
  http.request = wrap(http.request);
  http.get = wrap(http.get);
  syncBuiltinESMExports();
}
