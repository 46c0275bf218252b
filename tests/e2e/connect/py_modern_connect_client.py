#!/usr/bin/env python3
"""A user of toolgate connects their own account at an upstream service in the 2026-07-28 era:
the official MCP Python SDK 2.x (PyPI mcp, py-mcp2 venv of tests/e2e/setup.sh), `Client` in mode
"auto" (server/discover, then 2026-07-28 requests without a session), whose requests declare
URL-mode elicitation in `_meta["io.modelcontextprotocol/clientCapabilities"]` because it has an
elicitation callback. Driven by tests/e2e/connect.sh:

    $HARNESS_DIR/py-mcp2/bin/python tests/e2e/connect/py_modern_connect_client.py --url http://127.0.0.1:T/mcp \\
        --issuer http://127.0.0.1:T --idp-issuer http://127.0.0.1:I --upstream-issuer http://127.0.0.1:A \\
        --browser http://127.0.0.1:B --login carol --upstream-login octo-carol [--upstream notes]
        [--wait-for FILE] [--db toolgate.db] [--tokens-file FILE]

Checks (one `PASS <check>` or `FAIL <check>: <why>` line each on stdout; notes_* and connect_notes
stand for the tools and input request of the --upstream given):
  sign-in          the SDK signs the user in at toolgate (dynamic registration, the browser in a
                   context kept as --login); the connection speaks 2026-07-28
  input_required   notes_whoami unconnected, driven by hand (allow_input_required): an
                   InputRequiredResult with inputRequests.connect_notes = elicitation/create, mode
                   url, url {issuer}/oauth/connect/{U}?c=<43>; and a requestState
  decline          the retry with inputResponses.connect_notes = decline and that requestState: an
                   isError result
  accept           (once --wait-for exists) notes_whoami through the SDK's own retry loop: the elicitation callback opens the
                   link in the browser (connect: toolgate's page, the upstream's login and consent,
                   "connected") and accepts; the SDK retries and gets --upstream-login; the
                   callback ran once, for a URL-mode request
  own data         notes_my_notes: the account's own (empty) notes, nobody else's
  tampering        (with --db) another user's sealed tokens moved into this user's vault_grants
                   row (or, with no other row, one character altered): notes_my_notes answers
                   input_required again (the row does not open; it is not used)
"""

import argparse
import asyncio
import importlib.metadata
import os
import sqlite3
import sys
import threading
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2 as httpx
from mcp import Client, types
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

SDK_VERSION = importlib.metadata.version("mcp")
LABEL = "py2"
failures = 0


class CheckFailed(Exception):
    pass


class Stop(Exception):
    pass


def check(ok: Any, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def note_failure() -> None:
    global failures
    failures += 1


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
    def __init__(self, tokens_file: str | None) -> None:
        self.saved: list[OAuthToken] = []
        self.client_info: OAuthClientInformationFull | None = None
        self.tokens_file = tokens_file

    async def get_tokens(self) -> OAuthToken | None:
        return self.saved[-1] if self.saved else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.saved.append(tokens)
        if self.tokens_file:
            with open(self.tokens_file, "a") as f:
                f.write(tokens.access_token + "\n" + (tokens.refresh_token + "\n" if tokens.refresh_token else ""))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Callback:
    def __init__(self) -> None:
        self.params: dict[str, str] = {}
        self.arrived = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                u = urlsplit(self.path)
                if u.path == "/callback":  # not the browser's /favicon.ico after it
                    outer.params = {k: v[0] for k, v in parse_qs(u.query).items()}
                    outer.arrived.set()
                body = b"<!doctype html><title>Signed in</title><p>Signed in."
                self.send_response(200 if u.path == "/callback" else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.server.server_address[1]}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def text_of(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def run(args: argparse.Namespace) -> None:
    issuer = args.issuer.rstrip("/")
    U = args.upstream  # noqa: N806 - the upstream's name at toolgate: its tools' prefix
    callback = Callback()
    storage = Memory(args.tokens_file)
    signins: list[dict[str, Any]] = []
    asked: list[Any] = []
    connects: list[dict[str, Any]] = []
    state: dict[str, Any] = {}

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

    async def callback_handler() -> AuthorizationCodeResult:
        p = callback.params
        check(not p.get("error"), f"toolgate answered error={p.get('error')}: {p.get('error_description')}")
        return AuthorizationCodeResult(code=p.get("code", ""), state=p.get("state"), iss=p.get("iss"))

    async def on_elicit(_ctx: Any, params: Any) -> types.ElicitResult:
        """The user's client: a URL-mode request opens the link in the browser, then accepts."""
        asked.append(params)
        url = getattr(params, "url", None)
        if getattr(params, "mode", None) != "url" or not url:
            return types.ElicitResult(action="decline")
        async with httpx.AsyncClient(timeout=60) as plain:
            out = (await plain.post(f"{args.browser}/connect", json={
                "url": url, "context": args.login, "idp": args.idp_issuer, "login": args.login,
                "upstream": args.upstream_issuer, "upstreamLogin": args.upstream_login, "label": f"{LABEL}-connect", "timeoutMs": 40000,
            })).json()
        connects.append(out)
        return types.ElicitResult(action="accept")

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
        transport = streamable_http_client(args.url, http_client=http)
        client = Client(transport, mode="auto", elicitation_callback=on_elicit, cache=None)

        async def signin() -> str:
            check(len(signins) == 1, f"{len(signins)} sign-ins")
            check(client.protocol_version == "2026-07-28", f"protocol {client.protocol_version}, wanted 2026-07-28")
            return f"protocol {client.protocol_version}, {' -> '.join(signins[0].get('steps', []))}"

        async def steps(client: Client) -> None:
            async def input_required() -> str:
                res = await client.session.call_tool(f"{U}_whoami", {}, allow_input_required=True)
                check(isinstance(res, types.InputRequiredResult), f"{U}_whoami answered {type(res).__name__}: {res.model_dump(mode='json', by_alias=True)}")
                reqs = res.input_requests or {}
                check(list(reqs) == [f"connect_{U}"], f"inputRequests keys {list(reqs)}, wanted ['connect_{U}']")
                req = reqs[f"connect_{U}"]
                d = req.model_dump(mode="json", by_alias=True)
                check(d.get("method") == "elicitation/create", f"inputRequests.connect_{U} {d}")
                params = d.get("params", {})
                check(params.get("mode") == "url" and params.get("message"), f"params {params}")
                url = params.get("url", "")
                c = parse_qs(urlsplit(url).query).get("c", [""])[0]
                check(url.startswith(f"{issuer}/oauth/connect/{U}?c=") and len(c) == 43, f"url {url}")
                state["rs"] = res.request_state
                state["first"] = res.model_dump(mode="json", by_alias=True, exclude_none=True)
                log(f"input_required: {state['first']}")
                return url.split("?")[0]

            await step(f"{U}_whoami unconnected (2026-07-28): input_required with a URL elicitation connect_{U}", input_required)

            async def request_state() -> str:
                check(state.get("rs"), f"no requestState in {state['first']}")
                return f"{len(state['rs'])} characters"

            await step("the input_required result carries a requestState", request_state, soft=True)

            async def decline() -> str:
                res = await client.session.call_tool(
                    f"{U}_whoami", {}, input_responses={f"connect_{U}": types.ElicitResult(action="decline")},
                    request_state=state["rs"], allow_input_required=True,
                )
                check(isinstance(res, types.CallToolResult), f"answered {type(res).__name__}: {res.model_dump(mode='json', by_alias=True)}")
                check(res.is_error, f"not isError: {text_of(res)!r}")
                return text_of(res)[:120]

            await step(f"the retry with inputResponses.connect_{U} = decline: an isError result", decline, soft=True)

            if args.wait_for:  # the other users' abuse checks want an empty vault first
                for _ in range(450):
                    if os.path.exists(args.wait_for):
                        break
                    await anyio.sleep(0.2)

            async def accept() -> str:
                who = text_of(await client.call_tool(f"{U}_whoami", {}))
                check(len(asked) == 1 and getattr(asked[0], "mode", None) == "url", f"the elicitation callback was asked {len(asked)} times: {asked}")
                out = connects[0] if connects else {}
                final = out.get("final") or {}
                check(out.get("ok") and final.get("status") == 200 and "connected" in final.get("text", "").lower(),
                      f"the connect in the browser: {out.get('error')} {final}")
                check(who == args.upstream_login, f"{U}_whoami answered {who!r}, wanted {args.upstream_login!r}")
                return f"{' -> '.join(out.get('steps', []))}; {who}"

            await step(f"{U}_whoami through the SDK's retry loop: the callback connects in the browser and accepts; the retry answers", accept)

            async def own() -> str:
                notes = text_of(await client.call_tool(f"{U}_my_notes", {}))
                check(args.upstream_login in notes and "alice:" not in notes and "bob:" not in notes, f"{U}_my_notes answered {notes!r}")
                return notes[:80]

            await step(f"{U}_my_notes: the account's own notes only", own, soft=True)

            if args.db:

                async def tamper() -> str:
                    # An attacker with write access to the database moves another user's sealed
                    # tokens into this user's row (or, with no other row, alters one character).
                    con = sqlite3.connect(args.db, timeout=10)
                    try:
                        rows = con.execute("SELECT id, principal, sealed, key_id FROM vault_grants").fetchall()
                        mine = [r for r in rows if r[1].endswith(args.login)]
                        check(len(mine) == 1, f"{len(mine)} vault_grants rows of {args.login} in {[r[1] for r in rows]}")
                        others = [r for r in rows if r is not mine[0] and not r[1].endswith(args.login)]
                        if others:
                            sealed, how = others[0][2], f"{others[0][1].split(chr(31))[-1]}'s sealed tokens moved into {args.login}'s row"
                        else:
                            old = mine[0][2]
                            i = len(old) // 2
                            sealed, how = old[:i] + ("A" if old[i] != "A" else "B") + old[i + 1:], "one character of the sealed tokens altered"
                        con.execute("UPDATE vault_grants SET sealed = ? WHERE id = ?", (sealed, mine[0][0]))
                        con.commit()
                    finally:
                        con.close()
                    res = await client.session.call_tool(f"{U}_my_notes", {}, allow_input_required=True)
                    dumped = res.model_dump(mode="json", by_alias=True, exclude_none=True)
                    check(isinstance(res, types.InputRequiredResult) and f"connect_{U}" in (res.input_requests or {}),
                          f"after the tampering {U}_my_notes answered {dumped}, wanted input_required (connect again)")
                    return how

                await step("a vault row tampered with in the database: not used, the user is asked to connect again", tamper, soft=True)

        signin_name = "sign-in at toolgate through the browser; the client speaks 2026-07-28"
        entered = False
        try:
            async with client:  # server/discover: the 401, the sign-in, then 2026-07-28
                entered = True
                await step(signin_name, signin)
                await steps(client)
        except Exception as e:  # noqa: BLE001
            if entered:
                raise
            note_failure()
            print(f"FAIL {LABEL}: {signin_name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", flush=True)
            traceback.print_exc(file=sys.stderr)
            raise Stop() from e


def main() -> int:
    global LABEL
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--idp-issuer", required=True)
    p.add_argument("--upstream-issuer", required=True)
    p.add_argument("--browser", required=True)
    p.add_argument("--login", required=True)
    p.add_argument("--upstream-login", required=True)
    p.add_argument("--tokens-file")
    p.add_argument("--upstream", default="notes", help="the upstream's name at toolgate (default notes)")
    p.add_argument("--wait-for")
    p.add_argument("--db")
    p.add_argument("--label")
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    LABEL = args.label or f"py2-{args.login}"

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args)

    def leaves(e: BaseException) -> list[BaseException]:
        return [x for sub in e.exceptions for x in leaves(sub)] if isinstance(e, BaseExceptionGroup) else [e]

    try:
        anyio.run(bounded)
    except BaseException as e:  # noqa: BLE001
        found = leaves(e)
        if any(isinstance(x, Stop) for x in found) and all(isinstance(x, (Stop, asyncio.CancelledError)) for x in found):
            return 1
        traceback.print_exc(file=sys.stderr)
        print(f"FAIL {LABEL}: finished: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'the run took too long (--timeout)'}", flush=True)
        return 1
    log(f"done (python mcp {SDK_VERSION})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
