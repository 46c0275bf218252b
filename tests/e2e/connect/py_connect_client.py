#!/usr/bin/env python3
"""A user of toolgate connects their own account at an upstream service, with the official MCP
Python SDK 1.x (PyPI mcp, py-mcp1 venv of tests/e2e/setup.sh; protocol 2025-11-25). Driven by
tests/e2e/connect.sh:

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/connect/py_connect_client.py --url http://127.0.0.1:T/mcp \\
        --issuer http://127.0.0.1:T --idp-issuer http://127.0.0.1:I --upstream-issuer http://127.0.0.1:A \\
        --upstream-url http://127.0.0.1:U/mcp --browser http://127.0.0.1:B --admin-url http://127.0.0.1:M \\
        --login alice --upstream-login octo-alice --notes-marker "alice:" --foreign-marker "bob:" \\
        [--abuse-login bob --db toolgate.db --barrier FILE] [--tokens-file FILE]

The admin token comes in the environment (ADMIN_TOKEN). One `PASS <check>` or `FAIL <check>: <why>`
line per check on stdout; the run stops at the first failure of a step the next ones need.

  sign-in        the SDK signs the user in at toolgate (dynamic registration, PKCE, the browser of
                 tests/e2e/oauth/browser.mjs in a context kept as --login: the identity provider's
                 session stays for the connect)
  tools/list     lists notes_whoami and notes_my_notes before any connection (unconnected = "list")
  no URL elicitation  (with --abuse-login) a second session on the same token whose client declares
                 no elicitation: notes_my_notes is an isError result naming {issuer}/oauth/connections
  -32042         notes_whoami in the session that declared elicitation.url: the SDK raises McpError
                 -32042 (UrlElicitationRequiredError.from_error): one URL-mode elicitation with an
                 elicitationId, a message and url {issuer}/oauth/connect/notes?c=<43 characters>,
                 without the user's name or token in it
  another user   (with --abuse-login) the link opened by another user's browser (a fresh one, signed
                 in at the identity provider as --abuse-login): 403 page saying "another user", no
                 step at the upstream; the database (--db) holds no vault_grants row; then the user's
                 own browser opening the same (consumed) link gets no "connected"; then --barrier is
                 written (the other client connects only after it)
  connect        the call again: a new link (new id); the user's browser (silent sign-in at the
                 identity provider) approves on toolgate's connect page, logs in at the upstream's
                 authorization server as --upstream-login and consents; toolgate sent it there with
                 response_type code, its client, PKCE S256, state, resource = --upstream-url, scope
                 notes and redirect_uri {issuer}/oauth/vault/callback/notes; the end page says
                 "connected", shows no token; the upstream's redirect replayed in the same browser
                 is refused (no connect pending any more)
  own data       notes_whoami = --upstream-login; notes_my_notes has --notes-marker lines only, none
                 of --foreign-marker; (with --abuse-login) the session without URL elicitation gets
                 the same: the connection belongs to the user, not to a session
  refresh        after --access-ttl + 2 s (the upstream access token has expired): notes_my_notes
                 still answers the user's notes
  revoke         GET /admin/connections lists this user's connection to notes (id, user, upstream,
                 scopes, times); DELETE /admin/connections/{id} -> 204; it is gone from the list; the
                 next notes_whoami raises -32042 again (a new link)
"""

import argparse
import asyncio
import base64
import importlib.metadata
import json
import os
import sqlite3
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
from mcp.shared.exceptions import McpError, UrlElicitationRequiredError

SDK_VERSION = importlib.metadata.version("mcp")
LABEL = "py"
failures = 0


class CheckFailed(Exception):
    pass


class Stop(Exception):
    """A step the next ones need failed: the run ends."""


def check(ok: Any, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def log(*parts: Any) -> None:
    print(f"[{LABEL}]", *parts, file=sys.stderr, flush=True)


async def step(name: str, fn: Any, soft: bool = False) -> Any:
    global failures
    try:
        detail = await fn()
        print(f"PASS {LABEL}: {name}" + (f" ({detail})" if detail else ""), flush=True)
        return detail
    except Exception as e:  # noqa: BLE001 - every failure is reported as one line
        failures += 1
        why = str(e) if isinstance(e, CheckFailed) else f"{type(e).__name__}: {e}"
        print(f"FAIL {LABEL}: {name}: " + " | ".join(why.splitlines()[:3]), flush=True)
        if not isinstance(e, CheckFailed):
            traceback.print_exc(file=sys.stderr)
        if not soft:
            raise Stop() from e
        return None


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


def claims_of(jwt: str) -> dict[str, Any]:
    try:
        part = jwt.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except Exception:  # noqa: BLE001 - not a JWT
        return {}


def text_of(result: types.CallToolResult) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def run(args: argparse.Namespace) -> None:
    issuer = args.issuer.rstrip("/")
    callback = Callback()
    storage = Memory()
    signins: list[dict[str, Any]] = []
    elicit_requests: list[Any] = []
    state: dict[str, Any] = {}
    admin_headers = {"authorization": f"Bearer {os.environ.get('ADMIN_TOKEN', '')}"}

    async def redirect_handler(authorization_url: str) -> None:
        callback.arrived.clear()
        async with httpx.AsyncClient(timeout=60) as plain:
            res = await plain.post(f"{args.browser}/signin", json={
                "authorizationUrl": authorization_url, "redirectUri": callback.uri, "login": args.login,
                "label": f"{LABEL}-signin", "timeoutMs": 40000, "context": args.login,
            })
        browser = res.json()
        signins.append(browser)
        if not browser.get("ok"):
            raise CheckFailed(f"the sign-in in the browser failed: {browser.get('error')}")
        check(await anyio.to_thread.run_sync(callback.arrived.wait, 5), "the browser reached the redirect URI but the listener got nothing")

    async def callback_handler() -> tuple[str, str | None]:
        p = callback.params
        check(not p.get("error"), f"toolgate answered error={p.get('error')}: {p.get('error_description')}")
        return p.get("code", ""), p.get("state")

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        # toolgate answers with the -32042 error instead; a request here is noted and declined
        elicit_requests.append(params)
        log(f"elicitation/create request: {params}")
        return types.ElicitResult(action="decline")

    async def browser_connect(url: str, **extra: Any) -> dict[str, Any]:
        job = {"url": url, "idp": args.idp_issuer, "login": args.login, "upstream": args.upstream_issuer,
               "upstreamLogin": args.upstream_login, "label": f"{LABEL}-connect", "timeoutMs": 40000, **extra}
        async with httpx.AsyncClient(timeout=60) as plain:
            return (await plain.post(f"{args.browser}/connect", json=job)).json()

    def path_of(out: dict[str, Any]) -> str:
        return " | ".join(f"{n['method']} {n['url'].split('?')[0]} {n.get('status', '')}" for n in out.get("navigations", []))

    async def expect_elicitation(session: ClientSession, tool: str) -> dict[str, Any]:
        try:
            result = await session.call_tool(tool, {})
        except McpError as e:
            check(e.error.code == -32042, f"{tool}: error {e.error.code} {e.error.message!r}, wanted -32042")
            err = UrlElicitationRequiredError.from_error(e.error)
            check(len(err.elicitations) == 1, f"{len(err.elicitations)} elicitations, wanted 1: {e.error.data}")
            el = err.elicitations[0]
            check(el.mode == "url" and el.elicitationId and el.message, f"elicitation {el}")
            u = urlsplit(el.url)
            c = parse_qs(u.query).get("c", [""])[0]
            check(el.url.startswith(f"{issuer}/oauth/connect/notes?c="), f"url {el.url}, wanted {issuer}/oauth/connect/notes?c=<id>")
            check(len(c) == 43, f"connect id of {len(c)} characters, wanted 43")
            access = storage.saved[-1].access_token if storage.saved else ""
            check(args.login not in el.url and (not access or access not in el.url), f"the link carries the user's name or token: {el.url}")
            return {"url": el.url, "id": el.elicitationId, "c": c, "message": el.message, "error_message": e.error.message}
        raise CheckFailed(f"{tool} answered a result, wanted error -32042: {result.model_dump(mode='json')}")

    async def call_text(session: ClientSession, tool: str) -> str:
        result = await session.call_tool(tool, {})
        check(not result.isError, f"{tool} answered isError: {text_of(result)!r}")
        return text_of(result)

    def vault_rows() -> list[tuple[Any, ...]]:
        con = sqlite3.connect(f"file:{args.db}?mode=ro", uri=True, timeout=10)
        try:
            return con.execute("SELECT principal, upstream FROM vault_grants").fetchall()
        finally:
            con.close()

    provider = OAuthClientProvider(
        args.url,
        OAuthClientMetadata(
            client_name=f"toolgate e2e connect ({LABEL})",
            redirect_uris=[callback.uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage,
        redirect_handler,
        callback_handler,
    )
    async with httpx.AsyncClient(auth=provider, timeout=httpx.Timeout(30.0, read=60.0)) as http:
        async with streamable_http_client(args.url, http_client=http) as streams:
            async with ClientSession(streams[0], streams[1], elicitation_callback=on_elicit) as session:

                async def signin() -> str:
                    with anyio.fail_after(60):
                        init = await session.initialize()
                    check(len(signins) == 1, f"{len(signins)} sign-ins")
                    check(init.protocolVersion == "2025-11-25", f"protocol {init.protocolVersion}")
                    claims = claims_of(storage.saved[-1].access_token)
                    state["sub"] = claims.get("sub")
                    if args.tokens_file:
                        with open(args.tokens_file, "a") as f:
                            f.write(storage.saved[-1].access_token + "\n")
                            if storage.saved[-1].refresh_token:
                                f.write(storage.saved[-1].refresh_token + "\n")
                    return f"sub {state['sub']}, {' -> '.join(signins[0].get('steps', []))}, session declares elicitation.url"

                await step("sign-in at toolgate through the browser (2025-11-25 session declaring elicitation.url)", signin)

                async def listing() -> str:
                    names = [t.name for t in (await session.list_tools()).tools]
                    check({"notes_whoami", "notes_my_notes"} <= set(names), f"tools/list: {names}")
                    return f"{len(names)} tools"

                await step("tools/list shows notes_whoami and notes_my_notes before any connection", listing, soft=True)

                plain_session: ClientSession | None = None
                async with streamable_http_client(args.url, http_client=http) as streams2:
                    async with ClientSession(streams2[0], streams2[1]) as plain:
                        if args.abuse_login:
                            plain_session = plain

                            async def no_url() -> str:
                                init = await plain.initialize()
                                check(init.protocolVersion == "2025-11-25", f"protocol {init.protocolVersion}")
                                try:
                                    result = await plain.call_tool("notes_my_notes", {})
                                except McpError as e:
                                    raise CheckFailed(f"error {e.error.code} {e.error.message!r} to a client without URL elicitation, wanted an isError result") from e
                                text = text_of(result)
                                check(result.isError, f"not isError: {text!r}")
                                check(f"{issuer}/oauth/connections" in text, f"the result does not name {issuer}/oauth/connections: {text!r}")
                                check("/oauth/connect/notes?c=" not in text, f"a connect link went to a client that cannot open it: {text!r}")
                                return text[:160]

                            await step("a session without URL elicitation: isError naming /oauth/connections", no_url, soft=True)

                        async def first() -> str:
                            e = await expect_elicitation(session, "notes_whoami")
                            state["first"] = e
                            return f"elicitationId {e['id']}, {e['url'].split('?')[0]}, message {e['message'][:80]!r}"

                        await step("notes_whoami unconnected: -32042 with one URL elicitation to the connect page", first)

                        if args.abuse_login:

                            async def another_user() -> str:
                                out = await browser_connect(state["first"]["url"], login=args.abuse_login, label=f"{LABEL}-abuse")
                                final = out.get("final") or {}
                                check(out.get("ok"), f"the browser did not end on a toolgate page: {out.get('error')}; path: {path_of(out)}")
                                check(final.get("status") == 403, f"HTTP {final.get('status')}, wanted 403; page: {final.get('text', '')[:200]!r}")
                                check("another user" in final.get("text", ""), f"the page does not say 'another user': {final.get('text', '')[:300]!r}")
                                check("upstream-login" not in out.get("steps", []) and not out.get("upstreamAuthorization"), f"the other user got to the upstream: steps {out.get('steps')}")
                                check("idp-login" in out.get("steps", []), f"no sign-in at the identity provider: steps {out.get('steps')}")
                                rows = vault_rows()
                                check(not rows, f"vault_grants holds {rows}")
                                return f"{' -> '.join(out.get('steps', []))}, 403, vault_grants empty"

                            await step(f"{args.abuse_login} opening {args.login}'s connect link: 403 'another user', nothing stored", another_user, soft=True)

                            async def consumed() -> str:
                                out = await browser_connect(state["first"]["url"], context=args.login, label=f"{LABEL}-consumed")
                                final = out.get("final") or {}
                                check(out.get("ok"), f"the browser did not end on a toolgate page: {out.get('error')}; path: {path_of(out)}")
                                check(400 <= (final.get("status") or 0) < 500 and "return to your application" not in final.get("text", "").lower(),
                                      f"HTTP {final.get('status')}: {final.get('text', '')[:200]!r}, wanted a refusal")
                                check("connect-page" not in out.get("steps", []) and not out.get("upstreamAuthorization"), f"steps {out.get('steps')}")
                                check(not vault_rows(), f"vault_grants holds {vault_rows()}")
                                return f"HTTP {final.get('status')}: {final.get('text', '')[:100]!r}"

                            await step(f"the link {args.abuse_login} consumed, opened by {args.login}: refused, nothing stored", consumed, soft=True)

                        if args.barrier:
                            with open(args.barrier, "w") as f:
                                f.write("abuse checks done\n")

                        async def connect() -> str:
                            e = await expect_elicitation(session, "notes_whoami")
                            check(e["c"] != state["first"]["c"] and e["id"] != state["first"]["id"], "the same link (or elicitationId) again")
                            out = await browser_connect(e["url"], context=args.login, replay=True)
                            state["connect"] = out
                            final = out.get("final") or {}
                            check(out.get("ok"), f"the browser did not end on a toolgate page: {out.get('error')}; path: {path_of(out)}")
                            check(final.get("status") == 200 and "connected" in final.get("text", "").lower(), f"end page HTTP {final.get('status')}: {final.get('text', '')[:300]!r}")
                            steps = out.get("steps", [])
                            check(steps.count("connect-page") == 1 and "upstream-login" in steps and "idp-login" not in steps, f"steps {steps} (the identity provider's session should sign the user in silently)")
                            low = final.get("text", "").lower()
                            check("access_token" not in low and "refresh_token" not in low, "the end page shows token fields")
                            ua = (out.get("upstreamAuthorization") or {})
                            p = ua.get("params", {})
                            check(ua.get("endpoint") == f"{args.upstream_issuer}/auth", f"toolgate sent the user to {ua.get('endpoint')}")
                            want = {"response_type": "code", "client_id": "toolgate-notes", "code_challenge_method": "S256",
                                    "resource": args.upstream_url, "redirect_uri": f"{issuer}/oauth/vault/callback/notes"}
                            bad = {k: p.get(k) for k, v in want.items() if p.get(k) != v}
                            check(not bad, f"the authorization request at the upstream had {bad}, wanted {want}")
                            check(p.get("state") and p.get("code_challenge"), "no state or no PKCE challenge")
                            check("notes" in (p.get("scope") or "").split(), f"scope {p.get('scope')}")
                            cp = out.get("connectPage") or {}
                            check("notes" in cp.get("text", ""), f"the connect page does not name the upstream: {cp.get('text', '')[:200]!r}")
                            rp = out.get("replay") or {}
                            check(400 <= (rp.get("status") or 0) < 500, f"the replayed callback answered {rp}, wanted a 4xx refusal")
                            return f"{' -> '.join(steps)}; replayed callback HTTP {rp.get('status')}"

                        await step("notes_whoami again: a new link; connect in the browser ends 'connected'", connect)

                        async def connect_page() -> str:
                            cp = state["connect"].get("connectPage") or {}
                            check(cp.get("deny"), "no #deny button")
                            check(cp.get("csp"), "no Content-Security-Policy on the connect page")
                            return f"CSP {cp.get('csp')[:60]}..., X-Frame-Options {cp.get('xFrameOptions')}"

                        await step("toolgate's connect page: approve and deny, CSP", connect_page, soft=True)

                        async def own_data() -> str:
                            who = await call_text(session, "notes_whoami")
                            check(who == args.upstream_login, f"notes_whoami answered {who!r}, wanted {args.upstream_login!r}")
                            notes = await call_text(session, "notes_my_notes")
                            lines = notes.splitlines()
                            check(lines and all(x.startswith(args.notes_marker) for x in lines), f"notes_my_notes answered {notes!r}")
                            check(args.foreign_marker not in notes, f"another user's notes: {notes!r}")
                            check(not elicit_requests, f"toolgate sent elicitation/create requests: {elicit_requests}")
                            return f"{who}: {len(lines)} notes"

                        await step("the retried call: notes_whoami and notes_my_notes answer the user's own account", own_data)

                        if plain_session is not None:

                            async def plain_own() -> str:
                                notes = await call_text(plain_session, "notes_my_notes")
                                check(notes.startswith(args.notes_marker), f"notes_my_notes answered {notes!r}")
                                return ""

                            await step("the session without URL elicitation now gets the user's notes too", plain_own, soft=True)

                async def refresh() -> str:
                    await anyio.sleep(args.access_ttl + 2)
                    notes = await call_text(session, "notes_my_notes")
                    check(notes.startswith(args.notes_marker), f"notes_my_notes answered {notes!r}")
                    who = await call_text(session, "notes_whoami")
                    check(who == args.upstream_login, f"notes_whoami answered {who!r}")
                    return f"{args.access_ttl + 2:.0f} s after the connect"

                await step("after the upstream access token expired: the calls still answer (refreshed)", refresh)

                async def revoke() -> str:
                    async with httpx.AsyncClient(timeout=30, headers=admin_headers) as admin:
                        res = await admin.get(f"{args.admin_url}/admin/connections")
                        check(res.status_code == 200, f"GET /admin/connections: {res.status_code} {res.text[:200]}")
                        rows = res.json().get("connections", [])
                        mine = [r for r in rows if r.get("upstream") == "notes" and state["sub"] and state["sub"] in str(r.get("user"))]
                        check(len(mine) == 1, f"{len(mine)} connections to notes for {state['sub']} in {rows}")
                        row = mine[0]
                        missing = [k for k in ("id", "user", "upstream", "scopes", "created_at", "updated_at", "expires_at") if k not in row]
                        check(not missing, f"the connection lacks {missing}: {row}")
                        check("notes" in (row["scopes"] if isinstance(row["scopes"], list) else str(row["scopes"]).split()), f"scopes {row['scopes']}")
                        res = await admin.delete(f"{args.admin_url}/admin/connections/{row['id']}")
                        check(res.status_code == 204, f"DELETE /admin/connections/{row['id']}: {res.status_code} {res.text[:200]}")
                        left = [r for r in (await admin.get(f"{args.admin_url}/admin/connections")).json().get("connections", []) if r.get("id") == row["id"]]
                        check(not left, f"still listed after DELETE: {left}")
                    e = await expect_elicitation(session, "notes_whoami")
                    return f"user {row['user']}; then -32042 again ({e['url'].split('?')[0]})"

                await step("revoke: DELETE /admin/connections/{id} -> 204, then the next call asks to connect again", revoke)


def main() -> int:
    global LABEL
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--idp-issuer", required=True)
    p.add_argument("--upstream-issuer", required=True)
    p.add_argument("--upstream-url", required=True)
    p.add_argument("--browser", required=True)
    p.add_argument("--admin-url", required=True)
    p.add_argument("--login", required=True)
    p.add_argument("--upstream-login", required=True)
    p.add_argument("--notes-marker", required=True)
    p.add_argument("--foreign-marker", required=True)
    p.add_argument("--abuse-login")
    p.add_argument("--db")
    p.add_argument("--barrier")
    p.add_argument("--tokens-file")
    p.add_argument("--access-ttl", type=float, default=20)
    p.add_argument("--label")
    p.add_argument("--timeout", type=float, default=150)
    args = p.parse_args()
    if args.abuse_login and not args.db:
        p.error("--abuse-login needs --db")
    LABEL = args.label or f"py-{args.login}"

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args)

    def leaves(e: BaseException) -> list[BaseException]:
        return [x for sub in e.exceptions for x in leaves(sub)] if isinstance(e, BaseExceptionGroup) else [e]

    try:
        anyio.run(bounded)
    except BaseException as e:  # noqa: BLE001 - the SDK's task groups raise ExceptionGroups
        found = leaves(e)
        if any(isinstance(x, Stop) for x in found) and all(isinstance(x, (Stop, asyncio.CancelledError)) for x in found):
            return 1
        traceback.print_exc(file=sys.stderr)
        print(f"FAIL {LABEL}: finished: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'the run took too long (--timeout)'}", flush=True)
        return 1
    finally:
        if args.barrier and not os.path.exists(args.barrier):
            with open(args.barrier, "w") as f:  # never leave the other client waiting
                f.write("stopped early\n")
    log(f"done (python mcp {SDK_VERSION})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
