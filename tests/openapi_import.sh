#!/usr/bin/env bash
# `toolgate tools import openapi` on real published OpenAPI documents, as the registries ship
# them (pinned versions, checked against their SHA-256, cached under ~/.cache/toolgate/openapi):
#
#   @octokit/openapi 23.0.2       generated/api.github.com.json   GitHub's REST API, OpenAPI 3.0.3, JSON (13 MB)
#   @figma/rest-api-spec 0.43.0   openapi/openapi.yaml            Figma's REST API, OpenAPI 3.1.0, YAML
#   @readme/oas-examples 8.2.2    3.0/json/petstore.json          the Swagger Petstore, OpenAPI 3.0.0, JSON
#
# Each is imported (into TOML, YAML and JSON in turn), the count of tools written must reach a
# floor, the skipped operations must be reported with their reasons, and `toolgate tools
# validate` must accept the output with zero errors once the secrets the import names are
# allowed. Then the imported Petstore is served by `toolgate serve` and its getPetById (a GET
# with a path parameter and the document's api_key scheme) is called over MCP against a stand-in
# API on loopback (tests/openapi_import/stub_api.py), which must see the key from the
# environment. Prints a PASS or FAIL line per check; the last line is
# `openapi_import: N passed, M failed`.
#
# Environment:
#   TOOLGATE_BIN          the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   OPENAPI_CACHE         where the packages are kept (default ~/.cache/toolgate/openapi)
#   OPENAPI_IMPORT_PORTS  loopback ports to try for toolgate, FIRST-LAST (default 18600-18699)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
HERE="$ROOT/tests/openapi_import"
CACHE="${OPENAPI_CACHE:-$HOME/.cache/toolgate/openapi}"
PORTS="${OPENAPI_IMPORT_PORTS:-18600-18699}"
CLIENT_TIMEOUT=60
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-openapi-import.XXXXXX")"

log() { printf '[openapi import] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$ROOT/tests/e2e/lib.sh"

stub_pid=""
server_pid=""
cleanup() {
  stop_pid "$server_pid"
  server_pid=""
  stop_pid "$stub_pid"
  stub_pid=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Records NAME as passed when the command succeeds (safe under `set -e`).
check() { # name command...
  local name="$1" rc=0
  shift
  "$@" || rc=$?
  record "$name" "$rc"
}

finish() { summary openapi_import; }

toolgate_bin
command -v npm >/dev/null || { log "npm is needed to fetch the packages" && exit 2; }

# ---- the documents, from the npm registry ----------------------------------------------------
# package@version  tarball  sha256  file in the package
PACKAGES=(
  "@octokit/openapi@23.0.2 octokit-openapi-23.0.2.tgz 71a18407dd5e8464f4e0525daf03deabbe65abd9287d6adc7b5d98f516cd0d0c package/generated/api.github.com.json"
  "@figma/rest-api-spec@0.43.0 figma-rest-api-spec-0.43.0.tgz 208361544008cc68250678a717665d10e32194deddb1fac0c276ef6ab16582f6 package/openapi/openapi.yaml"
  "@readme/oas-examples@8.2.2 readme-oas-examples-8.2.2.tgz df951ee87b5b069c86148bf5bbf3923d6cfd27fb95a45aacb95f06b31f604241 package/3.0/json/petstore.json"
)
mkdir -p "$CACHE"
fetch() { # package tarball sha256 member → prints the extracted file's path
  local package="$1" tarball="$2" sum="$3" member="$4" dir
  dir="$CACHE/${tarball%.tgz}"
  if [ ! -f "$CACHE/$tarball" ] || ! echo "$sum  $CACHE/$tarball" | sha256sum --check --status; then
    rm -f "$CACHE/$tarball"
    (cd "$CACHE" && npm pack --silent "$package" >/dev/null 2>"$LOGS/npm-pack.log") || { cat "$LOGS/npm-pack.log" >&2 && return 1; }
    echo "$sum  $CACHE/$tarball" | sha256sum --check --status || { log "$tarball does not match its pinned SHA-256" && return 1; }
  fi
  if [ ! -f "$dir/$member" ]; then
    mkdir -p "$dir"
    tar -xzf "$CACHE/$tarball" -C "$dir" "$member"
  fi
  echo "$dir/$member"
}

# The variables the imported tools read their credentials from, as the import's summary names
# them: `... tools.http.secret_env = ["A", "B"]` → A,B.
secret_env() { # import stderr file
  sed -n 's/.*tools\.http\.secret_env = \[\(.*\)\]).*/\1/p' "$1" | head -n1 | tr -d '" '
}

# import_and_validate NAME SPEC FORMAT MIN_TOOLS MIN_SKIPPED [import options...]
import_and_validate() {
  local name="$1" spec="$2" format="$3" min_tools="$4" min_skipped="$5" out rc written skipped allowed
  shift 5
  out="$LOGS/$name.$format"
  rc=0
  "$TOOLGATE_BIN" tools import openapi "$spec" --out "$out" "$@" 2>"$LOGS/$name.import.log" || rc=$?
  record "$name: import exits 0" "$rc"
  [ "$rc" = 0 ] || { tail -n 20 "$LOGS/$name.import.log" >&2 && return 0; }
  read -r written skipped < <(sed -n 's/^\([0-9]*\) tools written to .*, \([0-9]*\) operations skipped$/\1 \2/p' "$LOGS/$name.import.log") || true
  log "$name: $written tools written, $skipped skipped ($(du -h "$out" | cut -f1) of $format)"
  check "$name: at least $min_tools tools written (got ${written:-none})" test "${written:-0}" -ge "$min_tools"
  check "$name: skipped operations reported with reasons (${skipped:-none}, at least $min_skipped)" \
    test "${skipped:-0}" -ge "$min_skipped" -a "$(grep -c '^skipped: ' "$LOGS/$name.import.log")" = "${skipped:-0}"
  allowed="$(secret_env "$LOGS/$name.import.log")"
  rc=0
  TOOLGATE__TOOLS__PACKS__EXAMPLES=false TOOLGATE__TOOLS__HTTP__SECRET_ENV="$allowed" \
    "$TOOLGATE_BIN" tools validate "$out" >"$LOGS/$name.validate.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || ! grep -q "^$out: ${written:-x} valid tool definitions" "$LOGS/$name.validate.log"; then
    rc=1
    tail -n 20 "$LOGS/$name.validate.log" >&2
  fi
  record "$name: tools validate accepts all ${written:-?} definitions${allowed:+ (secret_env $allowed)}" "$rc"
}

specs=()
for entry in "${PACKAGES[@]}"; do
  read -r package tarball sum member <<<"$entry"
  if file="$(fetch "$package" "$tarball" "$sum" "$member")"; then
    record "fetch $package" 0
    specs+=("$file")
  else
    record "fetch $package" 1
    finish
    exit 1
  fi
done
GITHUB_SPEC="${specs[0]}" FIGMA_SPEC="${specs[1]}" PETSTORE_SPEC="${specs[2]}"

import_and_validate github "$GITHUB_SPEC" yaml 1000 1 --prefix gh_
check "github: the binary upload is skipped, naming the operation and why" \
  grep -q '^skipped: POST /repos/{owner}/{repo}/releases/{release_id}/assets (repos/upload-release-asset): the request body is application/octet-stream' "$LOGS/github.import.log"
import_and_validate github-issues "$GITHUB_SPEC" toml 20 0 --prefix gh_ --include-tag issues
import_and_validate figma "$FIGMA_SPEC" toml 40 0
import_and_validate petstore "$PETSTORE_SPEC" json 15 2
check "petstore: the multipart upload is skipped, naming the operation and why" \
  grep -q '^skipped: POST /pet/{petId}/uploadImage (uploadFile): the request body is multipart/form-data' "$LOGS/petstore.import.log"

# ---- an imported GET, served and called over MCP --------------------------------------------
KEY="petstore-key-$RANDOM$RANDOM"
python3 "$HERE/stub_api.py" --key "$KEY" --log "$LOGS/stub.jsonl" >"$LOGS/stub.port" 2>"$LOGS/stub.log" &
stub_pid=$!
for _ in $(seq 100); do [ -s "$LOGS/stub.port" ] && break; sleep 0.1; done
STUB_PORT="$(head -n1 "$LOGS/stub.port")"
[ -n "$STUB_PORT" ] || { record "stand-in API start" 1 && finish && exit 1; }

TOOLS="$LOGS/served"
mkdir -p "$TOOLS"
cp "$LOGS/petstore.json" "$TOOLS/petstore.json"
launch_toolgate() { # port
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" \
    TOOLGATE__TOOLS__PACKS__EXAMPLES=false \
    TOOLGATE__TOOLS__PATH="$TOOLS" \
    TOOLGATE__TOOLS__HTTP__ALLOW_HOSTS="127.0.0.1" \
    TOOLGATE__TOOLS__HTTP__SECRET_ENV="$(secret_env "$LOGS/petstore.import.log")" \
    SWAGGER_PETSTORE_BASE_URL="http://127.0.0.1:$STUB_PORT/v2" \
    SWAGGER_PETSTORE_API_KEY="$KEY" \
    TOOLGATE__LOG__FORMAT=json \
    exec "$TOOLGATE_BIN" serve
}
if ! start_toolgate; then
  record "toolgate serve with the imported Petstore" 1
  finish
  exit 1
fi
TOKEN="$(TOOLGATE__SERVER__BIND="127.0.0.1:$SERVER_PORT" TOOLGATE__AUTH__DEV_KEY_FILE="$LOGS/dev-signing.key" "$TOOLGATE_BIN" dev-token)"
log "toolgate on 127.0.0.1:$SERVER_PORT serving $TOOLS; stand-in API on $STUB_PORT"
shopt -s lastpipe
run_client mcp-getPetById python3 "$HERE/mcp_call.py" --url "http://127.0.0.1:$SERVER_PORT/mcp" --token "$TOKEN" \
  --tool getPetById --args '{"petId": 7}' --expect doggie-7
check "the API received GET /v2/pet/7 with the key from the environment" \
  grep -q "\"path\": \"/v2/pet/7\".*\"api_key\": \"$KEY\"" "$LOGS/stub.jsonl"
if grep -q "$KEY" "$LOGS/server.log" "$LOGS/served/petstore.json"; then
  record "the key appears in neither the tools file nor the server's log" 1
else
  record "the key appears in neither the tools file nor the server's log" 0
fi
finish
