#!/usr/bin/env node
// Virtual servers through the official TypeScript MCP SDK (npm @modelcontextprotocol/sdk 1.x,
// loaded from $HARNESS_DIR/node/node_modules by ./lib/sdk.mjs), which speaks 2025-11-25: the
// counterpart of tests/e2e/servers_py.py for tests/e2e/servers.sh, with the same --expect file
// (per endpoint its url, the environment variable holding its token, name, title, exact tool
// names, overridden fields, one call, names unknown there) and the same checks:
//   --checks serve         data and ops identify as themselves, list exactly their own tools
//                          (renamed ones under their new names; overridden descriptions, titles,
//                          hints), call one, do not
//                          know the other's tools or the old names; the other server's token is
//                          refused (the SDK fails to connect; the HTTP answers were 401); /mcp
//                          lists everything under the original names
//   --checks list_changed  GET-stream listeners on ops, data and /mcp; py_add_tool through ops:
//                          ops and /mcp hear notifications/tools/list_changed, ops lists and calls
//                          the new tool; py_remove_tool: ops hears again; data hears nothing until
//                          1.5 s after ops heard the last change
// Prints `PASS <check>` or `FAIL <check>: <why>` per check; exit status 0 only if all passed.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { load, sdkVersion } from './lib/sdk.mjs';

const { values: args } = parseArgs({
  options: {
    expect: { type: 'string' },
    checks: { type: 'string' },
    'request-timeout': { type: 'string', default: '20' },
    timeout: { type: 'string', default: '55' },
  },
});
if (!args.expect || !['serve', 'list_changed'].includes(args.checks)) {
  console.error('usage: servers_ts.mjs --expect FILE --checks serve|list_changed [--request-timeout S] [--timeout S]');
  process.exit(2);
}

const { Client } = await load('client/index.js');
const { StreamableHTTPClientTransport } = await load('client/streamableHttp.js');
const { ToolListChangedNotificationSchema } = await load('types.js');

const expect = JSON.parse(readFileSync(args.expect, 'utf8'));
const ERA = '2025-11-25';
const reqOpts = { timeout: Number(args['request-timeout']) * 1000 };
const sleep = (ms) => new Promise((r) => { setTimeout(r, ms); });
const textOf = (r) => (r.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('');
const token = (endpoint) => process.env[expect[endpoint].token_env];
let passed = 0;
let failed = 0;
class CheckFailed extends Error {}
function check(ok, message) {
  if (!ok) throw new CheckFailed(message);
}
async function step(name, body) {
  try {
    const detail = await body();
    passed += 1;
    console.log(`PASS ${name}${detail ? ` (${detail})` : ''}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}: ${e instanceof CheckFailed ? e.message : `${e.name}: ${e.message}`}`);
  }
}

// Connects to one endpoint with a bearer token; `fetch` is wrapped to note every HTTP status and
// the answer to the standalone GET stream, which the SDK opens in the background.
async function connect(url, bearer, onListChanged) {
  const conn = { statuses: [], get: null, protocolVersion: null };
  const recording = async (u, init) => {
    const response = await fetch(u, init);
    const method = init?.method ?? 'GET';
    conn.statuses.push([method, response.status]);
    if (method === 'GET') conn.get = response.status;
    return response;
  };
  conn.transport = new StreamableHTTPClientTransport(new URL(url), {
    fetch: recording, requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const setVersion = conn.transport.setProtocolVersion.bind(conn.transport);
  conn.transport.setProtocolVersion = (v) => { conn.protocolVersion = v; setVersion(v); };
  conn.client = new Client({ name: 'toolgate-e2e-servers-ts', version: sdkVersion }, { capabilities: {} });
  if (onListChanged) conn.client.setNotificationHandler(ToolListChangedNotificationSchema, async () => onListChanged());
  await conn.client.connect(conn.transport, reqOpts);
  return conn;
}
async function close(conn) {
  if (!conn) return;
  await conn.transport.terminateSession().catch(() => {});
  await conn.client.close().catch(() => {});
}
async function tools(client) {
  const found = new Map();
  let cursor;
  for (let pages = 1; pages <= 100; pages += 1) {
    const page = await client.listTools(cursor ? { cursor } : undefined, reqOpts);
    for (const t of page.tools) {
      check(!found.has(t.name), `tools/list names ${t.name} twice`);
      found.set(t.name, t);
    }
    cursor = page.nextCursor;
    if (!cursor) return found;
  }
  throw new CheckFailed('tools/list did not end within 100 pages');
}
// The fields of `fields` (nested: annotations) whose value `tool` does not have, as it has them.
function mismatches(tool, fields) {
  const out = {};
  for (const [key, value] of Object.entries(fields)) {
    const got = tool?.[key];
    if (value !== null && typeof value === 'object') {
      const inner = mismatches(got ?? {}, value);
      if (Object.keys(inner).length > 0) out[key] = inner;
    } else if (got !== value) {
      out[key] = got ?? null;
    }
  }
  return out;
}
const sorted = (xs) => [...xs].sort();
const same = (a, b) => JSON.stringify(sorted(a)) === JSON.stringify(sorted(b));

async function identifiesAsItself(endpoint) {
  const want = expect[endpoint];
  const conn = await connect(want.url, token(endpoint));
  try {
    check(conn.protocolVersion === ERA, `negotiated ${conn.protocolVersion}, wanted ${ERA}`);
    const server = conn.client.getServerVersion() ?? {};
    check(server.name === want.name, `serverInfo.name ${JSON.stringify(server.name)}, wanted ${want.name}`);
    check(server.title === want.title, `serverInfo.title ${JSON.stringify(server.title)}, wanted ${want.title}`);
    const instructions = conn.client.getInstructions() ?? null;
    check(instructions === want.instructions, `instructions ${JSON.stringify(instructions)}, wanted ${JSON.stringify(want.instructions)}`);
    return `${conn.protocolVersion}; serverInfo ${JSON.stringify(server.name)} ${JSON.stringify(server.title)}`;
  } finally {
    await close(conn);
  }
}

async function servesItsOwn(endpoint) {
  const want = expect[endpoint];
  const conn = await connect(want.url, token(endpoint));
  try {
    const listed = await tools(conn.client);
    check(same(listed.keys(), want.tools), `lists ${JSON.stringify(sorted(listed.keys()))}, wanted exactly ${JSON.stringify(sorted(want.tools))}`);
    for (const [name, fields] of Object.entries(want.served)) {
      const differs = mismatches(listed.get(name), fields);
      check(Object.keys(differs).length === 0, `${name} is served with ${JSON.stringify(differs)}, wanted ${JSON.stringify(fields)}`);
    }
    const r = await conn.client.callTool({ name: want.call.name, arguments: want.call.arguments }, undefined, reqOpts);
    check(!r.isError && textOf(r) === want.call.text, `${want.call.name} returned ${JSON.stringify(r)}`);
    for (const stranger of want.unknown) {
      let answer;
      try {
        answer = await conn.client.callTool({ name: stranger, arguments: {} }, undefined, reqOpts);
      } catch (e) {
        check(String(e.message).includes('Unknown tool'), `calling ${stranger} threw ${e.name}: ${e.message}`);
        continue;
      }
      check(answer.isError && textOf(answer).includes('Unknown tool'), `${stranger} answered here: ${JSON.stringify(answer)}`);
    }
    return `${listed.size} tools; ${want.call.name} -> ${JSON.stringify(textOf(r))}; unknown here: ${want.unknown.join(', ')}`;
  } finally {
    await close(conn);
  }
}

async function refused(endpoint, tokenOf) {
  const statuses = [];
  const bearer = token(tokenOf);
  const recording = async (u, init) => {
    const response = await fetch(u, init);
    statuses.push([init?.method ?? 'GET', response.status]);
    return response;
  };
  const transport = new StreamableHTTPClientTransport(new URL(expect[endpoint].url), {
    fetch: recording, requestInit: { headers: { Authorization: `Bearer ${bearer}` } },
  });
  const client = new Client({ name: 'toolgate-e2e-servers-ts', version: sdkVersion }, { capabilities: {} });
  let error;
  try {
    await client.connect(transport, reqOpts);
    await client.listTools(undefined, reqOpts);
  } catch (e) {
    error = e;
  } finally {
    await close({ client, transport });
  }
  check(error, `connected to ${endpoint} and listed its tools with a token minted for ${tokenOf}`);
  check(statuses.length > 0 && statuses.every(([, s]) => s === 401), `HTTP answers ${JSON.stringify(statuses)}, wanted only 401`);
  return `HTTP ${JSON.stringify(statuses)}; the SDK threw ${error.name}: ${String(error.message).slice(0, 120)}`;
}

async function defaultServesEverything() {
  const want = expect.default;
  const conn = await connect(want.url, token('default'));
  try {
    const listed = await tools(conn.client);
    const names = new Set(listed.keys());
    const missing = want.includes.filter((n) => !names.has(n));
    check(missing.length === 0, `/mcp lacks ${missing}`);
    const present = want.excludes.filter((n) => names.has(n));
    check(present.length === 0, `/mcp lists the virtual servers' own names ${present}`);
    for (const [name, fields] of Object.entries(want.not_served)) {
      check(Object.keys(mismatches(listed.get(name), fields)).length > 0, `/mcp serves ${name} with a virtual server's ${JSON.stringify(fields)}`);
    }
    return `${names.size} tools`;
  } finally {
    await close(conn);
  }
}

// Waits until more than `count` notifications were heard; when the next came, or null.
async function moreThan(heard, count, withinMs) {
  for (let waited = 0; heard.length <= count && waited < withinMs; waited += 20) await sleep(20);
  return heard.length > count ? heard[count] : null;
}

async function listChanged() {
  const tool = `added_${process.pid}_ts`;
  const served = `py_${tool}`;
  const heard = { ops: [], data: [], default: [] };
  const conns = {};
  try {
    for (const endpoint of Object.keys(heard)) {
      conns[endpoint] = await connect(expect[endpoint].url, token(endpoint), () => heard[endpoint].push(Date.now()));
    }
    for (const [endpoint, conn] of Object.entries(conns)) {
      for (let waited = 0; conn.get === null && waited < 5000; waited += 20) await sleep(20);
      check(conn.get === 200, `${endpoint}'s GET stream answered ${conn.get}`);
    }
    const { ops, data } = conns;
    const before = { ops: heard.ops.length, default: heard.default.length };
    const started = Date.now();
    let r = await ops.client.callTool({ name: 'py_add_tool', arguments: { name: tool } }, undefined, reqOpts);
    check(!r.isError, `py_add_tool returned ${JSON.stringify(r)}`);
    const at = await moreThan(heard.ops, before.ops, 10000);
    check(at !== null, 'ops heard no notifications/tools/list_changed within 10 s of the upstream\'s');
    check(await moreThan(heard.default, before.default, 10000) !== null, '/mcp heard no notifications/tools/list_changed within 10 s');
    check((await tools(ops.client)).has(served), `${served} not listed at ops after list_changed`);
    r = await ops.client.callTool({ name: served, arguments: {} }, undefined, reqOpts);
    check(textOf(r) === `${tool} was added at runtime`, `${served} at ops returned ${JSON.stringify(r)}`);
    check(!(await tools(data.client)).has(served), `${served} listed at data`);

    const count = heard.ops.length;
    r = await ops.client.callTool({ name: 'py_remove_tool', arguments: { name: tool } }, undefined, reqOpts);
    check(!r.isError, `py_remove_tool returned ${JSON.stringify(r)}`);
    const last = await moreThan(heard.ops, count, 10000);
    check(last !== null, 'ops heard no notifications/tools/list_changed within 10 s of the removal');
    check(!(await tools(ops.client)).has(served), `${served} still listed at ops after its removal`);
    await sleep(Math.max(0, last + 1500 - Date.now()));
    check(heard.data.length === 0, `data heard ${heard.data.length} notifications/tools/list_changed; its list never changed`);
    return `ops heard after ${(at - started) / 1000} s; data silent for ${(Date.now() - started) / 1000} s`;
  } finally {
    await Promise.all(Object.values(conns).map(close));
  }
}

const run = async () => {
  if (args.checks === 'serve') {
    await Promise.all([
      step(`${ERA} data: identifies as itself (serverInfo, instructions)`, () => identifiesAsItself('data')),
      step(`${ERA} ops: identifies as itself (serverInfo, instructions)`, () => identifiesAsItself('ops')),
      step(`${ERA} data: lists exactly its own tools, calls one, not the others'`, () => servesItsOwn('data')),
      step(`${ERA} ops: lists exactly its own tools, calls one, not the others'`, () => servesItsOwn('ops')),
      step(`${ERA} /mcp: lists everything under the original names`, defaultServesEverything),
      step(`${ERA} ops: a token minted for data is refused (401)`, () => refused('ops', 'data')),
      step(`${ERA} data: a token minted for ops is refused (401)`, () => refused('data', 'ops')),
    ]);
  } else {
    await step(`${ERA}: upstream list_changed reaches ops and /mcp, not data`, listChanged);
  }
};
const timer = setTimeout(() => {
  console.log(`FAIL ${args.checks}: the run did not end within ${args.timeout} s`);
  process.exit(1);
}, Number(args.timeout) * 1000);
try {
  await run();
} catch (e) {
  failed += 1;
  console.log(`FAIL ${args.checks}: ${e.name}: ${e.message}`);
}
clearTimeout(timer);
process.exit(failed === 0 && passed > 0 ? 0 : 1);
