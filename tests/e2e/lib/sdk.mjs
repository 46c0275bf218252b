// The official TypeScript MCP SDK that tests/e2e/setup.sh installed into the harness
// ($HARNESS_DIR, default ~/.cache/toolgate-e2e), loaded by path so every client script (e2e,
// OAuth, cluster) runs the one pinned version.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const SDK = path.join(process.env.HARNESS_DIR || path.join(os.homedir(), '.cache', 'toolgate-e2e'),
  'node', 'node_modules', '@modelcontextprotocol', 'sdk');

/** The installed SDK's version, e.g. "1.32.2". */
export const sdkVersion = JSON.parse(readFileSync(path.join(SDK, 'package.json'), 'utf8')).version;

/** Imports one of the SDK's ESM modules, e.g. `load('client/index.js')`. */
export const load = (p) => import(pathToFileURL(path.join(SDK, 'dist', 'esm', p)).href);
