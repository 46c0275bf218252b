#!/usr/bin/env bash
# Per-caller token exchange end to end: toolgate in auth mode "jwt" behind the real authorization
# server of tests/e2e/oauth.sh (npm oidc-provider, tests/e2e/oauth/as.mjs, which implements RFC
# 8693 token exchange for the client "toolgate"), serving the FastMCP server
# tests/e2e/upstreams/fastmcp_server.py as an upstream with
#
#   oauth = { grant = "token_exchange", token_url = <AS>/token, client_id = "toolgate",
#             client_secret = { env = "TG_UPSTREAM_SECRET" }, audience = <upstream URL>,
#             scopes = ["upstream:tools"] }
#
# (as py_), and once more with scopes = ["upstream:admin"], which the AS never grants for it (as
# pyx_). The upstream verifies nothing: its header(name) tool answers with the Authorization
# header of the request that carried the call, and the checks decode that token. The client
# secret has characters HTTP Basic must form-encode (RFC 6749 section 2.3.1). A Python program
# (written to the log directory, run with the py-mcp1 venv: httpx, PyJWT and the MCP SDK 1.x)
# then checks:
#   - caller tokens: client credentials at the AS for toolgate's resource, scope mcp:tools, for
#     three clients (three subjects): mcp-m2m, mcp-m2m-2 and mcp-m2m-no-exchange, whose tokens
#     the AS refuses to exchange
#   - the AS itself: a caller gets no token for the upstream on its own (invalid_target), and a
#     subject token with a forged signature is not exchanged (invalid_grant)
#   - tools/list through toolgate has py_header and pyx_header: toolgate listed the upstream with
#     its own client-credentials token, which the AS logged as issued to toolgate (sub toolgate,
#     aud the upstream, scope upstream:tools)
#   - py_header {"name": "authorization"} for each of two callers: the upstream got a bearer
#     token that is not the caller's, signed by the AS (its JWKS), iss the AS, aud the upstream
#     URL (not toolgate's resource), sub the caller's sub, client_id toolgate, act {sub:
#     toolgate}, scope upstream:tools; a second call reuses it; the AS issued exactly one
#     exchanged token per caller
#   - the refused subject gets an isError result naming the refusal (invalid_grant and the AS's
#     reason); pyx_header gets one naming invalid_scope
#   - neither the caller tokens, the exchanged tokens nor the client secret are in toolgate's log
# Then: toolgate still healthy, no panic in its log, the AS still running.
#
# Needs tests/e2e/setup.sh to have run (components node22, py-mcp1, oauth-as). Everything listens
# on 127.0.0.1 only. Prints a PASS or FAIL line per check; the last line is
# `upstream-oauth: N passed, M failed`; exit status 0 only if M is 0. Called by tests/e2e/run.sh,
# or alone:
#
#   TOOLGATE_BIN=target/debug/toolgate tests/e2e/upstream_oauth.sh
#
# Environment:
#   HARNESS_DIR                 where setup.sh installed things (default ~/.cache/toolgate-e2e)
#   TOOLGATE_BIN                the toolgate binary (default: cargo build --locked --bin toolgate, debug)
#   E2E_UPSTREAM_OAUTH_PORTS    loopback ports for the upstream and toolgate, FIRST-LAST (default
#                               18600-18699); the authorization server takes any free port
#   E2E_CLIENT_TIMEOUT          seconds the checking program may take (default 120)
set -euo pipefail
shopt -s lastpipe # the loop reading the checker's output runs in this shell, so it can count

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
E2E="$ROOT/tests/e2e"
export HARNESS_DIR="${HARNESS_DIR:-$HOME/.cache/toolgate-e2e}"
PORTS="${E2E_UPSTREAM_OAUTH_PORTS:-18600-18699}"
CLIENT_TIMEOUT="${E2E_CLIENT_TIMEOUT:-120}"
NODE="$HARNESS_DIR/node22/node"
PY="$HARNESS_DIR/py-mcp1/bin/python"
LOGS="$(mktemp -d "${TMPDIR:-/tmp}/toolgate-e2e-upstream-oauth.XXXXXX")"
# toolgate's secret at the AS: as in tests/e2e/oauth/as.mjs (client "toolgate"); given to toolgate
# (and the checker) in the environment only
TG_UPSTREAM_SECRET='toolgate secret:+/&=%'

log() { printf '[e2e upstream-oauth] %s\n' "$*" >&2; }
# shellcheck source=tests/e2e/lib.sh
. "$E2E/lib.sh"

as_pid=""
py_pid=""
server_pid=""
cleanup() {
  stop_pid "$server_pid"
  stop_pid "$py_pid"
  stop_pid "$as_pid"
  server_pid="" py_pid="" as_pid=""
}
finished=""
finish() {
  finished=1
  [ "$failed" = 0 ] || (IFS=';' && log "failed: ${failures[*]} (logs in $LOGS)")
  echo "upstream-oauth: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}
# Whatever ends this script, the servers stop and the last line is the summary.
on_exit() {
  local rc=$?
  cleanup
  if [ -z "$finished" ]; then
    record "ran to the end (exit $rc)" 1
    finish || true
  fi
}
trap on_exit EXIT
trap 'exit 130' INT TERM
trap 'log "failed (exit $?) at line $LINENO: $BASH_COMMAND"' ERR
fail_early() { # what
  record "$1" 1
  finish || true
  exit 1
}

for need in "$NODE" "$PY" "$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json"; do
  [ -e "$need" ] || { log "$need is missing: run tests/e2e/setup.sh first" && fail_early "harness installed"; }
done
if [ -z "${TOOLGATE_BIN:-}" ]; then
  (cd "$ROOT" && cargo build --locked --bin toolgate)
  TOOLGATE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/toolgate"
fi
[ -x "$TOOLGATE_BIN" ] || { log "no toolgate binary at $TOOLGATE_BIN" && exit 2; }

# ---- ports: the upstream takes the first free one of PORTS, toolgate one after it -------------
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
NEXT_PORT="${PORTS%-*}"
LAST_PORT="${PORTS#*-}"
while port_busy "$NEXT_PORT"; do NEXT_PORT=$((NEXT_PORT + 1)); done
[ "$NEXT_PORT" -le "$LAST_PORT" ] || fail_early "a free port in $PORTS"
PY_PORT=$NEXT_PORT
NEXT_PORT=$((NEXT_PORT + 1))
PY_URL="http://127.0.0.1:$PY_PORT/mcp"

# ---- the upstream: verifies nothing, its header tool shows what it was sent --------------------
"$PY" "$E2E/upstreams/fastmcp_server.py" --port "$PY_PORT" </dev/null >"$LOGS/py.log" 2>&1 &
py_pid=$!
for _ in $(seq 200); do
  port_busy "$PY_PORT" && break
  kill -0 "$py_pid" 2>/dev/null || break
  sleep 0.1
done
if ! port_busy "$PY_PORT"; then
  log "the FastMCP upstream did not listen on 127.0.0.1:$PY_PORT within 20 s; its log:"
  tail -n 30 "$LOGS/py.log" >&2
  fail_early "upstream start"
fi

# ---- authorization server: the upstream is its only --upstream resource ------------------------
# It picks a free port itself and prints {"issuer": "http://127.0.0.1:<port>", ...} once listening.
"$NODE" "$E2E/oauth/as.mjs" --upstream "$PY_URL" >"$LOGS/as.out" 2>"$LOGS/as.log" &
as_pid=$!
ISSUER=""
for _ in $(seq 150); do
  kill -0 "$as_pid" 2>/dev/null || break
  ISSUER="$(sed -n 's/^{"issuer":"\(http:\/\/127\.0\.0\.1:[0-9]*\)".*/\1/p' "$LOGS/as.out")"
  [ -n "$ISSUER" ] && break
  sleep 0.1
done
if [ -z "$ISSUER" ]; then
  log "the authorization server did not start within 15 s; its log:"
  cat "$LOGS/as.log" >&2
  fail_early "authorization server start"
fi

# ---- toolgate ---------------------------------------------------------------------------------
# The resource URI names the port, so the settings file is written for each port tried.
write_config() { # port
  cat >"$LOGS/toolgate.toml" <<EOF
[auth]
mode = "jwt"
resource = "http://127.0.0.1:$1/mcp"
required_scopes = ["mcp:tools"]

[[auth.issuers]]
issuer = "$ISSUER"

[tools.packs]
examples = false

# every call as its caller: the caller's token exchanged at the AS for one meant for the upstream
[upstreams.py]
url = "$PY_URL"
allow_private = true
prefix = "py_"
oauth = { grant = "token_exchange", token_url = "$ISSUER/token", client_id = "toolgate", client_secret = { env = "TG_UPSTREAM_SECRET" }, audience = "$PY_URL", scopes = ["upstream:tools"] }

# the same, with a scope the AS never grants for the upstream: every exchange is refused
[upstreams.pyx]
url = "$PY_URL"
allow_private = true
prefix = "pyx_"
allow_tools = ["header"]
oauth = { grant = "token_exchange", token_url = "$ISSUER/token", client_id = "toolgate", client_secret = { env = "TG_UPSTREAM_SECRET" }, audience = "$PY_URL", scopes = ["upstream:admin"] }
EOF
}

launch_toolgate() { # port
  write_config "$1"
  TOOLGATE__SERVER__BIND="127.0.0.1:$1" \
    TOOLGATE__ADMIN__BIND="127.0.0.1:0" \
    TOOLGATE__STORAGE__DATA_DIR="$LOGS/data" \
    TOOLGATE__LIMITS__REQUEST_BURST=10000 TOOLGATE__LIMITS__TOOL_BURST=10000 \
    TOOLGATE__LOG__FORMAT=json \
    RUST_LOG="info,toolgate=debug" \
    TG_UPSTREAM_SECRET="$TG_UPSTREAM_SECRET" \
    exec "$TOOLGATE_BIN" serve --config "$LOGS/toolgate.toml"
}
PORTS="$NEXT_PORT-$LAST_PORT" # for start_toolgate
if ! start_toolgate; then
  fail_early "toolgate start"
fi
MCP="http://127.0.0.1:$SERVER_PORT/mcp"
log "authorization server $ISSUER (oidc-provider $("$NODE" -p "require('$HARNESS_DIR/oauth-as/node_modules/oidc-provider/package.json').version"))"
log "toolgate $("$TOOLGATE_BIN" --version | cut -d' ' -f2) on $MCP (auth mode jwt); upstream $PY_URL; logs in $LOGS"

# ---- the checks -------------------------------------------------------------------------------
cat >"$LOGS/check.py" <<'PYTHON'
"""Per-caller token exchange through toolgate (see tests/e2e/upstream_oauth.sh)."""

import argparse
import base64
import json
import os
import sys
import traceback
from typing import Any
from urllib.parse import quote_plus

import anyio
import httpx
import jwt
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN = "urn:ietf:params:oauth:token-type:access_token"
CALLERS = ["mcp-m2m", "mcp-m2m-2"]  # their tokens are exchanged
REFUSED = "mcp-m2m-no-exchange"  # the AS refuses to exchange its tokens

p = argparse.ArgumentParser()
p.add_argument("--url", required=True)
p.add_argument("--issuer", required=True)
p.add_argument("--upstream", required=True)
p.add_argument("--as-log", required=True)
p.add_argument("--server-log", required=True)
p.add_argument("--timeout", type=float, default=110)
args = p.parse_args()
SECRET = os.environ["TG_UPSTREAM_SECRET"]


class CheckFailed(Exception):
    pass


def check(ok: Any, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def log(*parts: Any) -> None:
    print("[check]", *parts, file=sys.stderr, flush=True)


def claims_of(token: str) -> dict[str, Any]:
    """The payload of a JWS, unverified."""
    parts = token.split(".")
    check(len(parts) == 3, f"not a JWS compact serialization ({len(parts)} parts): {token[:40]}...")
    return json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))


def audiences(claims: dict[str, Any]) -> list[str]:
    aud = claims.get("aud")
    return aud if isinstance(aud, list) else [aud]


def errors_of(e: BaseException) -> list[str]:
    """What went wrong, with the SDK's exception groups unwrapped."""
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in errors_of(sub)]
    if isinstance(e, CheckFailed):
        return [str(e)]
    return [f"{type(e).__name__}: {e}"]


async def step(name: str, body: Any) -> Any:
    """One check: PASS or FAIL line; returns the body's value (None on failure)."""
    assert ": " not in name, name  # the runner reads up to the first ': ' as the check's name
    try:
        value = await body()
    except Exception as e:  # noqa: BLE001
        why = "; ".join(errors_of(e))
        if not isinstance(e, CheckFailed):
            traceback.print_exc(file=sys.stderr)
        print(f"FAIL {name}: {why}", flush=True)
        return None
    print(f"PASS {name}", flush=True)
    return value if value is not None else True


def as_log_issued() -> list[dict[str, Any]]:
    out = []
    with open(args.as_log, encoding="utf-8") as f:
        for line in f:
            if line.startswith("[oauth-as] issued "):
                out.append(json.loads(line[len("[oauth-as] issued ") :]))
    return out


async def main() -> None:
    mcp, issuer, upstream = args.url, args.issuer, args.upstream
    http = httpx.AsyncClient(timeout=30)
    toolgate_auth = (quote_plus("toolgate"), quote_plus(SECRET))  # RFC 6749 section 2.3.1
    tokens: dict[str, str] = {}

    # ---- caller tokens, from the AS ----------------------------------------------------------
    async def caller_tokens() -> None:
        for client in CALLERS + [REFUSED]:
            res = await http.post(
                f"{issuer}/token",
                data={"grant_type": "client_credentials", "resource": mcp, "scope": "mcp:tools"},
                auth=(client, f"{client}-secret"),
            )
            check(res.status_code == 200, f"client credentials for {client}: HTTP {res.status_code} {res.text}")
            token = res.json()["access_token"]
            c = claims_of(token)
            check(c.get("sub") == client and audiences(c) == [mcp], f"{client}'s token: sub {c.get('sub')}, aud {c.get('aud')}")
            tokens[client] = token

    if not await step(f"caller tokens from the AS (client credentials, aud {mcp}, scope mcp:tools; subjects {', '.join(CALLERS + [REFUSED])})", caller_tokens):
        return

    # ---- the AS itself -------------------------------------------------------------------------
    async def no_upstream_token_for_callers() -> None:
        res = await http.post(
            f"{issuer}/token",
            data={"grant_type": "client_credentials", "resource": upstream, "scope": "upstream:tools"},
            auth=("mcp-m2m", "mcp-m2m-secret"),
        )
        check(res.status_code == 400 and res.json().get("error") == "invalid_target", f"HTTP {res.status_code} {res.text}")

    await step("the AS gives a caller no token for the upstream itself (invalid_target)", no_upstream_token_for_callers)

    async def forged_subject_refused() -> None:
        head, body, sig = tokens["mcp-m2m"].split(".")
        forged_claims = dict(claims_of(tokens["mcp-m2m"]), sub="someone-else")
        forged_body = base64.urlsafe_b64encode(json.dumps(forged_claims).encode()).rstrip(b"=").decode()
        res = await http.post(
            f"{issuer}/token",
            data={
                "grant_type": TOKEN_EXCHANGE,
                "subject_token": f"{head}.{forged_body}.{sig}",
                "subject_token_type": ACCESS_TOKEN,
                "requested_token_type": ACCESS_TOKEN,
                "audience": upstream,
                "scope": "upstream:tools",
            },
            auth=toolgate_auth,
        )
        check(res.status_code == 400 and res.json().get("error") == "invalid_grant", f"HTTP {res.status_code} {res.text}")

    await step("the AS does not exchange a subject token with a forged signature (invalid_grant)", forged_subject_refused)

    # ---- through toolgate ----------------------------------------------------------------------
    jwks = jwt.PyJWKClient((await http.get(f"{issuer}/.well-known/openid-configuration")).json()["jwks_uri"])

    async def as_caller(client: str, body: Any) -> Any:
        headers = {"authorization": f"Bearer {tokens[client]}"}
        async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30.0, read=60.0)) as h:
            async with streamable_http_client(mcp, http_client=h) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    return await body(session)

    async def header_call(session: ClientSession, tool: str) -> tuple[bool, str]:
        result = await session.call_tool(tool, {"name": "authorization"})
        text = "".join(getattr(c, "text", "") for c in result.content)
        return bool(result.isError), text

    async def listed() -> None:
        async def body(session: ClientSession) -> None:
            names = {t.name for t in (await session.list_tools()).tools}
            check({"py_header", "pyx_header"} <= names, f"tools/list has {sorted(names)}")

        await as_caller("mcp-m2m", body)
        own = [
            i
            for i in as_log_issued()
            if i.get("grant_type") == "client_credentials" and i.get("client") == "toolgate"
        ]
        check(own, "the AS issued no client-credentials token to toolgate")
        bad = [i for i in own if not (i.get("sub") == "toolgate" and audiences(i) == [upstream] and i.get("scope") in ("upstream:tools", None))]
        check(not bad, f"toolgate's own tokens as issued: {bad}")
        check(any(i.get("scope") == "upstream:tools" for i in own), f"no own token with scope upstream:tools: {own}")

    await step(
        "tools/list has py_header and pyx_header (discovery with toolgate's own client-credentials token, issued with sub toolgate and aud the upstream)",
        listed,
    )

    seen: dict[str, str] = {}
    for client in CALLERS:

        async def exchanged(client: str = client) -> None:
            async def body(session: ClientSession) -> None:
                error, text = await header_call(session, "py_header")
                check(not error, f"py_header answered isError: {text[:300]}")
                check(text.startswith("Bearer "), f"the upstream saw Authorization: {text[:80]!r}")
                token = text[len("Bearer ") :]
                check(token != tokens[client], "the upstream got the caller's own token")
                c = claims_of(token)
                log(f"{client}: the upstream saw a token with claims {json.dumps(c)}")
                check(upstream in audiences(c), f"aud {c.get('aud')}, wanted {upstream}")
                check(mcp not in audiences(c), f"aud {c.get('aud')} names toolgate's resource")
                check(c.get("sub") == claims_of(tokens[client])["sub"] == client, f"sub {c.get('sub')}, wanted {client}")
                check(c.get("iss") == issuer, f"iss {c.get('iss')}, wanted {issuer}")
                check(c.get("client_id") == "toolgate", f"client_id {c.get('client_id')}, wanted toolgate")
                check(c.get("act") == {"sub": "toolgate"}, f"act {c.get('act')}, wanted {{'sub': 'toolgate'}}")
                check(c.get("scope") == "upstream:tools", f"scope {c.get('scope')!r}, wanted 'upstream:tools'")
                key = jwks.get_signing_key_from_jwt(token).key
                jwt.decode(token, key, algorithms=["RS256"], audience=upstream, issuer=issuer)  # raises if not
                seen[client] = token
                error, again = await header_call(session, "py_header")
                check(not error and again == text, "a second call went upstream with another token")

            await as_caller(client, body)

        await step(
            f"caller {client} - the upstream got an exchanged token (signed by the AS, aud the upstream not toolgate, sub {client}, act toolgate, not the caller's) and it is reused",
            exchanged,
        )

    async def one_exchange_each() -> None:
        check(len(seen) == len(CALLERS) and len(set(seen.values())) == len(CALLERS), "the callers did not get tokens of their own")
        issued = [i for i in as_log_issued() if i.get("grant_type") == TOKEN_EXCHANGE]
        for client in CALLERS:
            mine = [i for i in issued if i.get("sub") == client]
            check(len(mine) == 1, f"the AS issued {len(mine)} exchanged tokens for {client}, wanted 1: {mine}")
            check(mine[0].get("client") == "toolgate", f"exchanged for {client} by {mine[0].get('client')}")
        others = [i for i in issued if i.get("sub") not in CALLERS]
        check(not others, f"exchanged tokens for others: {others}")

    await step("the AS issued exactly one exchanged token per caller, to toolgate", one_exchange_each)

    async def refused_subject() -> None:
        async def body(session: ClientSession) -> None:
            names = {t.name for t in (await session.list_tools()).tools}
            check("py_header" in names, f"tools/list for {REFUSED}: {sorted(names)}")
            error, text = await header_call(session, "py_header")
            log(f"{REFUSED}: py_header answered isError={error}: {text}")
            check(error, f"py_header answered without isError: {text[:80]}...")
            check("refused" in text and "invalid_grant" in text and "may not be exchanged" in text, f"the error does not name the refusal: {text}")

        await as_caller(REFUSED, body)

    await step(f"caller {REFUSED} (the AS refuses to exchange its tokens) - py_header is an isError naming invalid_grant", refused_subject)

    async def refused_scope() -> None:
        async def body(session: ClientSession) -> None:
            error, text = await header_call(session, "pyx_header")
            log(f"mcp-m2m: pyx_header answered isError={error}: {text}")
            check(error, f"pyx_header answered without isError: {text[:80]}...")
            check("refused" in text and "invalid_scope" in text, f"the error does not name the refusal: {text}")

        await as_caller("mcp-m2m", body)

    await step("pyx_ asks for scope upstream:admin, never granted - pyx_header is an isError naming invalid_scope", refused_scope)

    async def secrets_not_logged() -> None:
        with open(args.server_log, encoding="utf-8") as f:
            server_log = f.read()
        for what, secret in [("client secret", SECRET)] + [(f"{c}'s token", t) for c, t in tokens.items()] + [
            (f"{c}'s exchanged token", t) for c, t in seen.items()
        ]:
            check(secret not in server_log, f"toolgate's log has the {what}")
            check(secret.split(".")[-1] not in server_log, f"toolgate's log has the signature of the {what}")

    await step("toolgate's log has no token and no client secret", secrets_not_logged)
    await http.aclose()


async def bounded() -> None:
    with anyio.fail_after(args.timeout):
        await main()


try:
    anyio.run(bounded)
except Exception as e:  # noqa: BLE001
    traceback.print_exc(file=sys.stderr)
    print(f"FAIL checker run: {'; '.join(errors_of(e))}", flush=True)
    sys.exit(1)
PYTHON

# Each `PASS <check>` / `FAIL <check>: <why>` line of the checker is a check of this suite; a
# checker that dies without saying why is a failure of its own.
rc=0 fails=0
{ TG_UPSTREAM_SECRET="$TG_UPSTREAM_SECRET" timeout -k 5 "$CLIENT_TIMEOUT" "$PY" "$LOGS/check.py" --url "$MCP" --issuer "$ISSUER" --upstream "$PY_URL" \
  --as-log "$LOGS/as.log" --server-log "$LOGS/server.log" --timeout $((CLIENT_TIMEOUT > 20 ? CLIENT_TIMEOUT - 10 : CLIENT_TIMEOUT)) \
  2>"$LOGS/check.stderr" || echo "EXIT $?"; } | while IFS= read -r line; do
  case "$line" in
    "PASS "*)
      passed=$((passed + 1))
      log "PASS ${line#PASS }"
      ;;
    "FAIL "*)
      failed=$((failed + 1)) fails=$((fails + 1))
      line="${line#FAIL }"
      failures+=("${line%%: *}")
      line="FAIL $line"
      log "FAIL ${line#FAIL }"
      ;;
    "EXIT "*) rc="${line#EXIT }" ;;
    *) printf '%s\n' "$line" >>"$LOGS/check.stdout" ;;
  esac
done
[ "$rc" = 124 ] && log "the checker was killed after ${CLIENT_TIMEOUT}s"
if [ "$rc" != 0 ] && [ "$fails" = 0 ]; then record "checker run (exit $rc)" 1; fi
if [ "$rc" != 0 ] && [ -s "$LOGS/check.stderr" ]; then
  log "checker stderr (last lines):"
  tail -n 20 "$LOGS/check.stderr" >&2
fi

# ---- the servers themselves -------------------------------------------------------------------
if kill -0 "$server_pid" 2>/dev/null && healthy "$SERVER_PORT"; then
  record "toolgate still healthy" 0
else
  record "toolgate still healthy" 1
  tail -n 50 "$LOGS/server.log" >&2
fi
if grep -q 'panicked' "$LOGS/server.log"; then
  grep 'panicked' "$LOGS/server.log" | head -n 5 >&2
  record "no panic in toolgate's log" 1
else
  record "no panic in toolgate's log" 0
fi
if kill -0 "$as_pid" 2>/dev/null; then
  record "authorization server still running" 0
else
  record "authorization server still running" 1
  tail -n 50 "$LOGS/as.log" >&2
fi
cleanup
finish || exit 1
