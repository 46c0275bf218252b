#!/usr/bin/env python3
"""The driver of tests/cluster/connect.sh: one user's own account at the "notes" service (issue 29,
per-user upstream credentials) on N toolgate replicas behind nginx, with the official Python SDK
1.x (py-mcp1 venv of tests/e2e/setup.sh) for the sign-in and plain 2025-11-25 sessions (raw
JSON-RPC over Streamable HTTP, each declaring `elicitation.url`) on each replica's own listener.

  sign-in    the SDK signs the user in at toolgate's authorization server through nginx (dynamic
             registration, PKCE; the browser of tests/e2e/oauth/browser.mjs in a context kept as
             --login, whose identity-provider session serves the connect); tools/list through
             nginx shows notes_whoami and notes_my_notes
  connect    notes_whoami on replica-1 directly: -32042 with one URL elicitation, the link on
             nginx's origin; the browser follows it through nginx ("connected"); nginx's access
             log (--nginx-log) shows the connect's steps served by at least two replicas; then
             notes_whoami and notes_my_notes on the last replica directly, on every other replica
             and through nginx (the SDK session) answer the user's own account
  race       --rounds rounds, each making the stored access token due (`expired`: the grant's
             expires_ms set in the past; `due`: within the renewal window, still valid; `natural`:
             waiting until toolgate's own renewal point), then --calls notes_my_notes calls per
             replica fired at the same moment on every replica directly: every call answers the
             user's notes; the grant's version grows by exactly one per round (one refresh); the
             service's authorization server (--as-log) saw each refresh token spent once, each one
             it had issued, every refresh answered 200, no grant revoked, no grant error; the
             service (--rs-log) refused none of the user's tokens
  revoke     GET /admin/connections on one replica lists the connection; DELETE through replica-2's
             admin API -> 204; it is gone from another replica's list; the next notes_whoami on
             every other replica (and through nginx) is -32042 again

Environment: ADMIN_TOKEN (the operator's). `PASS <check>` / `FAIL <check>: <why>` lines on stdout
(tests/e2e/lib.sh's run_client reads them), then one JSON line of figures.

    ADMIN_TOKEN=... $HARNESS_DIR/py-mcp1/bin/python tests/cluster/connect.py --lb http://127.0.0.1:L/mcp \\
        --issuer http://127.0.0.1:L --replica http://127.0.0.1:P1/mcp --admin http://127.0.0.1:A1 ... \\
        --browser URL --idp-issuer URL --upstream-issuer URL --upstream-url URL --pg-url URL \\
        --nginx-log FILE --as-log FILE --rs-log FILE
"""

import argparse
import asyncio
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
from mcp import ClientSession, types
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from common import final_message

LEGACY = "2025-11-25"
failures = 0
figures: dict[str, Any] = {}


class CheckFailed(Exception):
    pass


class Stop(Exception):
    """A step the next ones need failed: the run ends."""


def check(ok: Any, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def log(*parts: Any) -> None:
    print("[cluster connect]", *parts, file=sys.stderr, flush=True)


async def step(name: str, fn: Any, soft: bool = False) -> Any:
    global failures
    try:
        detail = await fn()
        print(f"PASS {name}" + (f" — {detail}" if detail else ""), flush=True)
        return detail
    except Exception as e:  # noqa: BLE001 - every failure is reported as one line
        failures += 1
        why = str(e) if isinstance(e, CheckFailed) else f"{type(e).__name__}: {e}"
        print(f"FAIL {name}: " + " | ".join(why.splitlines()[:3]), flush=True)
        if not isinstance(e, CheckFailed):
            traceback.print_exc(file=sys.stderr)
        if not soft:
            raise Stop() from e
        return None


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def sql(pg_url: str, query: str) -> str:
    res = subprocess.run(["psql", "-qAt", "-F", "|", pg_url, "-c", query], capture_output=True, text=True, timeout=20)
    if res.returncode != 0:
        raise CheckFailed(f"psql: {res.stderr.strip()[:300]}")
    return res.stdout.strip()


def tagged_lines(path: str, prefix: str, skip: int = 0) -> list[dict[str, Any]]:
    out = []
    with open(path, errors="replace") as f:
        for i, line in enumerate(f):
            if i >= skip and line.startswith(prefix):
                out.append(json.loads(line[len(prefix):]))
    return out


def line_count(path: str) -> int:
    try:
        with open(path, errors="replace") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


# ---- the sign-in (the SDK's OAuth client, the browser service) ---------------------------------


class Memory:
    def __init__(self) -> None:
        self.saved: list[OAuthToken] = []
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.saved[-1] if self.saved else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.saved.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Callback:
    """The loopback redirect listener (RFC 8252) of the sign-in."""

    def __init__(self) -> None:
        self.params: dict[str, str] = {}
        self.arrived = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                u = urlsplit(self.path)
                if u.path != "/callback":
                    self.send_response(404)
                    self.end_headers()
                    return
                outer.params = {k: v[0] for k, v in parse_qs(u.query).items()}
                outer.arrived.set()
                body = b"<!doctype html><title>Signed in</title><p>Signed in."
                self.send_response(200)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


# ---- plain 2025-11-25 sessions on one listener -----------------------------------------------------


class Raw:
    """A 2025-11-25 session of the user on one URL (a replica's listener or nginx), its client
    declaring URL-mode elicitation; raw JSON-RPC, so calls can be fired at the same moment."""

    def __init__(self, http: httpx.AsyncClient, url: str, token: str, label: str, rid_prefix: str) -> None:
        self.http, self.url, self.token, self.label, self.rid_prefix = http, url, token, label, rid_prefix
        self.sid: str | None = None
        self.n = 0

    def headers(self, rid: str) -> dict[str, str]:
        h = {"authorization": f"Bearer {self.token}", "content-type": "application/json",
             "accept": "application/json, text/event-stream", "mcp-protocol-version": LEGACY, "x-request-id": rid}
        if self.sid:
            h["mcp-session-id"] = self.sid
        return h

    async def post(self, method: str, params: dict[str, Any] | None, notify: bool = False) -> tuple[int, dict[str, Any] | None]:
        self.n += 1
        rid = f"{self.rid_prefix}-{self.label}-{self.n}"
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if not notify:
            msg["id"] = self.n
        res = await self.http.post(self.url, headers=self.headers(rid), content=json.dumps(msg).encode())
        if notify:
            return res.status_code, None
        body = res.text
        found = final_message(res.headers.get("content-type", ""), body) if res.status_code == 200 else None
        if method == "initialize" and res.status_code == 200:
            self.sid = res.headers.get("mcp-session-id")
        if found is None:
            raise CheckFailed(f"{self.label}: {method}: HTTP {res.status_code} {body[:200]!r}")
        return res.status_code, found

    async def open(self) -> "Raw":
        _, msg = await self.post("initialize", {
            "protocolVersion": LEGACY,
            "capabilities": {"elicitation": {"form": {}, "url": {}}},
            "clientInfo": {"name": "toolgate-cluster-connect", "version": "1"},
        })
        check(msg and "result" in msg, f"{self.label}: initialize answered {msg}")
        check(msg["result"].get("protocolVersion") == LEGACY, f"{self.label}: protocol {msg['result'].get('protocolVersion')}")
        check(self.sid, f"{self.label}: no Mcp-Session-Id")
        status, _ = await self.post("notifications/initialized", None, notify=True)
        check(status in (200, 202), f"{self.label}: notifications/initialized: HTTP {status}")
        return self

    async def call(self, tool: str) -> dict[str, Any]:
        """The JSON-RPC response of tools/call `tool` (result or error)."""
        _, msg = await self.post("tools/call", {"name": tool, "arguments": {}})
        return msg or {}

    async def text(self, tool: str) -> str:
        msg = await self.call(tool)
        check("result" in msg, f"{self.label}: {tool} answered {json.dumps(msg)[:300]}")
        result = msg["result"]
        text = "".join(c.get("text", "") for c in result.get("content", []))
        check(not result.get("isError"), f"{self.label}: {tool} answered isError: {text[:300]!r}")
        return text

    async def elicitation(self, tool: str, issuer: str) -> dict[str, Any]:
        msg = await self.call(tool)
        err = msg.get("error")
        check(err and err.get("code") == -32042, f"{self.label}: {tool} answered {json.dumps(msg)[:300]}, wanted error -32042")
        els = (err.get("data") or {}).get("elicitations") or []
        check(len(els) == 1, f"{self.label}: {len(els)} elicitations: {err}")
        el = els[0]
        url = el.get("url", "")
        check(el.get("mode") == "url" and el.get("elicitationId"), f"{self.label}: elicitation {el}")
        check(url.startswith(f"{issuer}/oauth/connect/notes?c="), f"{self.label}: link {url}, wanted {issuer}/oauth/connect/notes?c=<id>")
        c = parse_qs(urlsplit(url).query).get("c", [""])[0]
        check(len(c) == 43, f"{self.label}: connect id of {len(c)} characters")
        check(self.token not in url, f"{self.label}: the link carries the MCP token")
        return {"url": url, "id": el["elicitationId"]}


# ---- the run -----------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> None:
    issuer = args.issuer.rstrip("/")
    n = len(args.replica)
    names = [f"replica-{i + 1}" for i in range(n)]
    port_name = {str(urlsplit(u).port): names[i] for i, u in enumerate(args.replica)}
    callback = Callback()
    storage = Memory()
    signins: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    admin_headers = {"authorization": f"Bearer {os.environ.get('ADMIN_TOKEN', '')}"}

    async def redirect_handler(authorization_url: str) -> None:
        callback.arrived.clear()
        async with httpx.AsyncClient(timeout=60) as plain:
            res = await plain.post(f"{args.browser}/signin", json={
                "authorizationUrl": authorization_url, "redirectUri": callback.uri, "login": args.login,
                "label": "cluster-signin", "timeoutMs": 40000, "context": args.login,
            })
        out = res.json()
        signins.append(out)
        if not out.get("ok"):
            raise CheckFailed(f"the sign-in in the browser failed: {out.get('error')}")
        check(await anyio.to_thread.run_sync(callback.arrived.wait, 5), "the browser reached the redirect URI but the listener got nothing")

    async def callback_handler() -> tuple[str, str | None]:
        p = callback.params
        check(not p.get("error"), f"toolgate answered error={p.get('error')}: {p.get('error_description')}")
        return p.get("code", ""), p.get("state")

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        log(f"elicitation/create request (unexpected): {params}")
        return types.ElicitResult(action="decline")

    provider = OAuthClientProvider(
        args.lb,
        OAuthClientMetadata(
            client_name="toolgate cluster connect",
            redirect_uris=[callback.uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage,
        redirect_handler,
        callback_handler,
    )
    plain = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=60.0), limits=httpx.Limits(max_connections=200))
    async with plain, httpx.AsyncClient(auth=provider, timeout=httpx.Timeout(30.0, read=60.0)) as http:
        async with streamable_http_client(args.lb, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], elicitation_callback=on_elicit) as sdk:

                async def signin() -> str:
                    with anyio.fail_after(60):
                        init = await sdk.initialize()
                    check(len(signins) == 1, f"{len(signins)} sign-ins")
                    check(init.protocolVersion == LEGACY, f"protocol {init.protocolVersion}")
                    tok = storage.saved[-1]
                    state["token"] = tok.access_token
                    with open(args.tokens_file, "a") as f:
                        f.write(tok.access_token + "\n")
                        if tok.refresh_token:
                            f.write(tok.refresh_token + "\n")
                    names_listed = [t.name for t in (await sdk.list_tools()).tools]
                    check({"notes_whoami", "notes_my_notes"} <= set(names_listed), f"tools/list: {names_listed}")
                    return f"{' -> '.join(signins[0].get('steps', []))}; tools/list through nginx: {len(names_listed)} tools, notes_whoami and notes_my_notes among them"

                await step("sign-in through nginx at toolgate's authorization server (Python SDK, the browser); tools/list lists the notes tools", signin)
                token = state["token"]
                raws: dict[str, list[Raw]] = {}

                async def sessions() -> str:
                    for i, url in enumerate(args.replica):
                        raws[names[i]] = [await Raw(plain, url, token, f"{names[i]}.s{k}", args.rid_prefix).open() for k in range(args.calls)]
                    return f"{args.calls} per replica, each declaring elicitation.url"

                await step("2025-11-25 sessions of the user on every replica's own listener", sessions)
                first, last = raws[names[0]][0], raws[names[-1]][0]

                async def elicit() -> str:
                    e = await first.elicitation("notes_whoami", issuer)
                    state["link"] = e
                    return f"elicitationId {e['id']}, {e['url'].split('?')[0]}"

                await step(f"notes_whoami on {names[0]} directly, unconnected: -32042 with a URL elicitation to the connect page on nginx's origin", elicit)

                async def connect() -> str:
                    before = line_count(args.nginx_log)
                    job = {"url": state["link"]["url"], "context": args.login, "idp": args.idp_issuer, "login": args.login,
                           "upstream": args.upstream_issuer, "upstreamLogin": args.upstream_login, "label": "cluster-connect", "timeoutMs": 40000}
                    async with httpx.AsyncClient(timeout=60) as b:
                        out = (await b.post(f"{args.browser}/connect", json=job)).json()
                    final = out.get("final") or {}
                    path = " | ".join(f"{x['method']} {x['url'].split('?')[0]} {x.get('status', '')}" for x in out.get("navigations", []))
                    check(out.get("ok"), f"the browser did not end on a toolgate page: {out.get('error')}; path: {path}")
                    check(final.get("status") == 200 and "connected" in final.get("text", "").lower(), f"end page HTTP {final.get('status')}: {final.get('text', '')[:300]!r}")
                    steps = out.get("steps", [])
                    check(steps.count("connect-page") == 1 and "upstream-login" in steps, f"steps {steps}")
                    await anyio.sleep(0.4)  # nginx flushes its access log every 100 ms
                    served: dict[str, set[str]] = {}
                    with open(args.nginx_log, errors="replace") as f:
                        for i, line in enumerate(f):
                            if i < before:
                                continue
                            try:
                                r = json.loads(line)
                            except ValueError:
                                continue
                            if r["uri"].startswith("/oauth/") and r["uri"] != "/oauth/jwks":
                                ports = {u.rsplit(":", 1)[1] for u in r["upstream"].split(", ") if u}
                                served.setdefault(f"{r['method']} {r['uri']}", set()).update(port_name.get(p, p) for p in ports)
                    every = set().union(*served.values()) if served else set()
                    figures["connect_steps"] = {k: sorted(v) for k, v in served.items()}
                    shown = "; ".join(f"{k} -> {' '.join(sorted(v))}" for k, v in served.items())
                    check(len(every) >= 2, f"the connect's steps went to {len(every)} replica(s) only: {shown}")
                    check(any(k.startswith("GET /oauth/connect/notes") for k in served) and any(k.startswith("GET /oauth/vault/callback/notes") for k in served),
                          f"nginx's access log lacks the link or the callback: {shown}")
                    return f"{' -> '.join(steps)}; served by {len(every)} replicas: {shown}"

                await step("the browser follows the link through nginx and connects ('connected'); nginx sent the connect's steps to at least two replicas", connect)

                async def own_data() -> str:
                    seen = []
                    for raw in [last] + [raws[x][0] for x in names[1:-1]] + [first]:
                        who = await raw.text("notes_whoami")
                        check(who == args.upstream_login, f"{raw.label}: notes_whoami answered {who!r}, wanted {args.upstream_login!r}")
                        notes = await raw.text("notes_my_notes")
                        lines = notes.splitlines()
                        check(lines and all(x.startswith(args.notes_marker) for x in lines), f"{raw.label}: notes_my_notes answered {notes!r}")
                        seen.append(raw.label.split(".")[0])
                    result = await sdk.call_tool("notes_my_notes", {})
                    text = "".join(getattr(c, "text", "") for c in result.content)
                    check(not result.isError and text.startswith(args.notes_marker), f"through nginx (the SDK session): {text[:200]!r}")
                    seen.append("nginx")
                    return f"{args.upstream_login}'s notes on {', '.join(seen)}"

                await step(f"the call after connecting, on {names[-1]} directly (then every replica and nginx): the user's own account at the service", own_data)

                # ---- the refresh race ----------------------------------------------------------
                def grant() -> tuple[int, int, int]:
                    out = sql(args.pg_url, "SELECT version, expires_ms, updated_ms FROM vault_grants WHERE upstream = 'notes'")
                    rows = [r for r in out.splitlines() if r]
                    check(len(rows) == 1, f"vault_grants rows for notes: {rows}")
                    v, e, u = (int(x) for x in rows[0].split("|"))
                    return v, e, u

                kinds = [args.round_kinds[i % len(args.round_kinds)] for i in range(args.rounds)]
                round_facts: list[str] = []

                async def one_round(r: int, kind: str) -> str:
                    v0, expires, updated = grant()
                    now = int(time.time() * 1000)
                    if kind == "expired":
                        sql(args.pg_url, f"UPDATE vault_grants SET expires_ms = {now - 1000} WHERE upstream = 'notes'")
                    elif kind == "due":
                        sql(args.pg_url, f"UPDATE vault_grants SET expires_ms = {now + 600} WHERE upstream = 'notes'")
                    else:  # natural: toolgate's own renewal point (min(30 s, half the lifetime) before expiry)
                        renew_before = max(1000, min(30_000, (expires - updated) // 2))
                        wait = (expires - renew_before - now) / 1000 + 0.3
                        check(wait < 40, f"the stored token is due in {wait:.0f} s")
                        await anyio.sleep(max(0.0, wait))
                    go = asyncio.Event()
                    results: list[tuple[str, float, str | None]] = []

                    async def fire(raw: Raw) -> None:
                        await go.wait()
                        t0 = time.monotonic()
                        try:
                            text = await raw.text("notes_my_notes")
                            bad = None if text.startswith(args.notes_marker) else f"answered {text[:120]!r}"
                        except Exception as e:  # noqa: BLE001 - reported below
                            bad = str(e)[:300]
                        results.append((raw.label, time.monotonic() - t0, bad))

                    tasks = [asyncio.create_task(fire(raw)) for x in names for raw in raws[x]]
                    await asyncio.sleep(0.05)
                    go.set()
                    await asyncio.gather(*tasks)
                    bad = [f"{label}: {why}" for label, _, why in results if why]
                    check(not bad, f"round {r} ({kind}): {len(bad)} of {len(results)} calls failed: {'; '.join(bad[:3])}")
                    v1 = grant()[0]
                    check(v1 == v0 + 1, f"round {r} ({kind}): the grant's version went {v0} -> {v1}, wanted exactly one refresh")
                    slowest = max(t for _, t, _ in results)
                    fact = f"{kind}: {len(results)} calls ok (slowest {slowest * 1000:.0f} ms), version {v0}->{v1}"
                    round_facts.append(fact)
                    return fact

                for r, kind in enumerate(kinds, 1):
                    await step(f"refresh race round {r} ({kind}): notes_my_notes fired at once, {args.calls} per replica on all {n} replicas directly: every call answers the user's notes, one refresh",
                               lambda r=r, kind=kind: one_round(r, kind), soft=True)
                figures["rounds"] = round_facts

                async def as_saw() -> str:
                    token_lines = tagged_lines(args.as_log, "[notes-as] token ")
                    refresh = [t for t in token_lines if t["grant_type"] == "refresh_token"]
                    issued_rt = [t["issued_rt"] for t in token_lines if t.get("issued_rt")]
                    spent = [t["spent"] for t in refresh]
                    problems = []
                    dupes = sorted({s for s in spent if spent.count(s) > 1})
                    if dupes:
                        problems.append(f"refresh tokens spent more than once: {dupes}")
                    rows = [r for r in sql(args.pg_url, "SELECT version FROM vault_grants WHERE upstream = 'notes'").splitlines() if r]
                    if len(rows) != 1:
                        problems.append(f"the connection is gone from vault_grants ({rows})")
                    elif len(refresh) != int(rows[0]) - 1:
                        problems.append(f"{len(refresh)} refresh requests, but the grant was refreshed {int(rows[0]) - 1} times (version {rows[0]})")
                    for t in refresh:
                        if t["status"] != 200 or t.get("error"):
                            problems.append(f"a refresh answered {t['status']} {t.get('error')}: {t.get('error_description')}")
                        if t["spent"] not in issued_rt:
                            problems.append(f"a refresh token the server never issued was presented: {t['spent']}")
                    # one chain: the code grant's refresh token, then each one the previous refresh issued
                    codes = [t for t in token_lines if t["grant_type"] == "authorization_code" and t["status"] == 200]
                    by_spent = {t["spent"]: t for t in refresh if t["status"] == 200}
                    chain = 0
                    if codes:
                        link = codes[-1]
                        while link.get("issued_rt") in by_spent:
                            link = by_spent[link["issued_rt"]]
                            chain += 1
                    if chain != len(refresh):
                        problems.append(f"the refreshes form a chain of {chain} from the code grant, not {len(refresh)}")
                    with open(args.as_log, errors="replace") as f:
                        events = [line.strip() for line in f if line.startswith("[notes-as] grant.")]
                    if events:
                        problems.append(f"grant events at the service's authorization server: {events[:3]}")
                    bearers = tagged_lines(args.rs_log, "[notes] bearer ")
                    cc_at = {t["issued_at"] for t in token_lines if t["grant_type"] == "client_credentials" and t.get("issued_at")}
                    refused = [b for b in bearers if not b.get("accepted") and b["digest"] not in cc_at]
                    if refused:
                        problems.append(f"the service refused {len(refused)} token(s) of the user: {refused[:2]}")
                    calls = tagged_lines(args.rs_log, "[notes] call ")
                    subs = sorted({c.get("sub") or "-" for c in calls})
                    figures["refreshes"] = len(refresh)
                    check(not problems, "; ".join(problems[:4]))
                    return (f"{len(refresh)} refreshes, {len(set(spent))} distinct refresh tokens, one chain from the code grant, all 200, "
                            f"no grant revoked; the service accepted every token of the user ({len(calls)} calls, by {subs})")

                await step("the service's authorization server: each refresh token spent exactly once (one chain), every refresh 200, no reuse, no grant revoked", as_saw)

                # ---- revoke through one replica, then ask again on the others -----------------
                async def revoke() -> str:
                    on = 1 if n > 1 else 0
                    other = 0 if on != 0 else n - 1
                    async with httpx.AsyncClient(timeout=30, headers=admin_headers) as admin:
                        res = await admin.get(f"{args.admin[other]}/admin/connections")
                        check(res.status_code == 200, f"GET /admin/connections on {names[other]}: {res.status_code} {res.text[:200]}")
                        rows = [c for c in res.json().get("connections", []) if c.get("upstream") == "notes"]
                        check(len(rows) == 1, f"connections to notes: {rows}")
                        cid = rows[0]["id"]
                        res = await admin.delete(f"{args.admin[on]}/admin/connections/{cid}")
                        check(res.status_code == 204, f"DELETE /admin/connections/{cid} on {names[on]}: {res.status_code} {res.text[:200]}")
                        left = (await admin.get(f"{args.admin[-1]}/admin/connections")).json().get("connections", [])
                        check(not [c for c in left if c.get("id") == cid], f"still listed on {names[-1]} after the DELETE: {left}")
                    asked = []
                    for i in [x for x in range(n) if x != on] + [on]:
                        e = await raws[names[i]][0].elicitation("notes_whoami", issuer)
                        check(e["url"] != state["link"]["url"], "the same link again")
                        asked.append(names[i])
                    try:
                        result = await sdk.call_tool("notes_whoami", {})
                        raise CheckFailed(f"through nginx: a result, wanted -32042: {result.model_dump(mode='json')}")
                    except Exception as e:  # noqa: BLE001 - the SDK raises McpError
                        code = getattr(getattr(e, "error", None), "code", None)
                        check(code == -32042, f"through nginx: {type(e).__name__}: {e}")
                    asked.append("nginx")
                    return f"{rows[0]['user']}'s connection {cid} deleted on {names[on]}; -32042 again on {', '.join(asked)}"

                await step("revoke through replica-2's admin API (DELETE /admin/connections/{id} -> 204): the next call on another replica asks to connect again (-32042)", revoke)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lb", required=True, help="nginx's MCP URL")
    p.add_argument("--issuer", required=True)
    p.add_argument("--replica", action="append", required=True, help="a replica's MCP URL (repeat)")
    p.add_argument("--admin", action="append", required=True, help="a replica's admin origin (repeat, same order)")
    p.add_argument("--browser", required=True)
    p.add_argument("--idp-issuer", required=True)
    p.add_argument("--upstream-issuer", required=True)
    p.add_argument("--upstream-url", required=True)
    p.add_argument("--pg-url", required=True)
    p.add_argument("--nginx-log", required=True)
    p.add_argument("--as-log", required=True)
    p.add_argument("--rs-log", required=True)
    p.add_argument("--tokens-file", required=True)
    p.add_argument("--login", default="alice")
    p.add_argument("--upstream-login", default="octo-alice")
    p.add_argument("--notes-marker", default="alice:")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--round-kinds", default="expired,due,expired,due,expired,natural",
                   help="comma-separated kinds, cycled over --rounds: expired, due, natural")
    p.add_argument("--calls", type=int, default=2, help="calls per replica per round (one session each)")
    p.add_argument("--rid-prefix", default="cluster-connect")
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    args.round_kinds = [k.strip() for k in args.round_kinds.split(",") if k.strip()]
    if len(args.replica) != len(args.admin) or len(args.replica) < 2:
        p.error("--replica and --admin: the same number, at least 2")
    if any(k not in ("expired", "due", "natural") for k in args.round_kinds):
        p.error("--round-kinds: expired, due or natural")

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args)

    def leaves(e: BaseException) -> list[BaseException]:
        return [x for sub in e.exceptions for x in leaves(sub)] if isinstance(e, BaseExceptionGroup) else [e]

    rc = 0
    try:
        anyio.run(bounded)
    except BaseException as e:  # noqa: BLE001 - the SDK's task groups raise ExceptionGroups
        found = leaves(e)
        if not (any(isinstance(x, Stop) for x in found) and all(isinstance(x, (Stop, asyncio.CancelledError)) for x in found)):
            traceback.print_exc(file=sys.stderr)
            print(f"FAIL the driver ran to its end: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'the run took too long (--timeout)'}", flush=True)
        rc = 1
    print(json.dumps(figures, separators=(",", ":")), flush=True)
    return 1 if rc or failures else 0


if __name__ == "__main__":
    sys.exit(main())
