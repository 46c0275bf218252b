#!/usr/bin/env python3
"""A user signs in through toolgate's own authorization server with the official MCP Python SDK
(PyPI `mcp`, 1.x or 2.x): its OAuth client provider (mcp.client.auth.OAuthClientProvider) as the
auth of the Streamable HTTP client, a loopback redirect listener (RFC 8252), and the browser of
tests/e2e/oauth/browser.mjs playing the user (identity provider login and consent, then toolgate's
consent page). Driven by tests/e2e/signin.sh and tests/cluster/signin.sh; run it with the
interpreter of a venv made by tests/e2e/setup.sh:

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/oauth/py_signin_client.py --url http://127.0.0.1:P/mcp \\
        --issuer http://127.0.0.1:P --idp-issuer http://127.0.0.1:Q --browser http://127.0.0.1:B \\
        --registration dcr|cimd [--client-metadata-url https://127.0.0.1:C/clients/py.json]

Checks (one `PASS <check>` or `FAIL <check>: <why>` line each on stdout; the run stops at the first
failure of a step the next ones need), the same as tests/e2e/oauth/ts_signin_client.mjs's:
discovery; the sign-in (dynamic registration, or the metadata document URL as client_id, where the
SDK supports it: client_metadata_url) with what toolgate sent the identity provider and answered
the client (code, state, iss); toolgate's consent page; the token (ES256, verified with toolgate's
JWKS); tools/list and calculate_sum = 5; the expired access token refused; then calculate_sum again
in the same session: this SDK refreshes before sending once the token's expires_in has passed
(grant refresh_token, no new sign-in, rotated refresh token) and gets 5.
"""

import argparse
import importlib.metadata
import json
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import jwt
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
if SDK_MAJOR >= 2:  # 2.x ships its own httpx fork and returns the callback as a model
    import httpx2 as httpx
    from mcp.shared.auth import AuthorizationCodeResult
else:
    import httpx

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


def report(ok: bool, name: str, detail: str = "") -> None:
    print(f"{'PASS' if ok else 'FAIL'} {LABEL}: {name}{detail}", flush=True)


async def step(name: str, fn: Any, soft: bool = False) -> Any:
    global failures
    try:
        detail = await fn()
        report(True, name, f" ({detail})" if detail else "")
        return detail
    except Exception as e:  # noqa: BLE001 - every failure is reported as one line
        failures += 1
        why = str(e) if isinstance(e, CheckFailed) else f"{type(e).__name__}: {e}"
        report(False, name, ": " + " | ".join(why.splitlines()[:3]))
        if not isinstance(e, CheckFailed):
            traceback.print_exc(file=sys.stderr)
        if not soft:
            raise Stop() from e
        return None


class Memory:
    """TokenStorage in memory, keeping every token set saved."""

    def __init__(self) -> None:
        self.saved: list[OAuthToken] = []
        self.client_info: OAuthClientInformationFull | None = None

    @property
    def tokens(self) -> OAuthToken | None:
        return self.saved[-1] if self.saved else None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.saved.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Trace:
    def __init__(self) -> None:
        self.entries: list[tuple[str, str, int, str | None]] = []

    async def hook(self, response: Any) -> None:
        request = response.request
        grant = None
        try:
            body = request.content.decode("utf-8", "replace") if request.content else ""
            if "grant_type=" in body:
                grant = parse_qs(body).get("grant_type", [None])[0]
        except Exception:  # noqa: BLE001 - a streamed body is not a token request
            pass
        url = str(request.url)
        self.entries.append((request.method, url, response.status_code, grant))
        www = response.headers.get("www-authenticate")
        log(f"{request.method} {url} -> {response.status_code}" + (f" [{grant}]" if grant else "") + (f" ({www})" if www else ""))

    def shown(self, start: int = 0) -> str:
        return " | ".join(f"{m} {u} {s}" + (f" {g}" if g else "") for m, u, s, g in self.entries[start:])

    def expect(self, steps: list[tuple[str, Any]], start: int = 0) -> None:
        at = start
        for what, test in steps:
            found = next((i for i in range(at, len(self.entries)) if test(*self.entries[i])), None)
            check(found is not None, f"the SDK's HTTP exchanges lack, after #{at}: {what}; trace: {self.shown(start)}")
            at = found + 1


class Callback:
    """The loopback redirect listener (RFC 8252): a thread serving GET /callback."""

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
                body = b"<!doctype html><title>Signed in</title><p>Signed in. You can close this window."
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


class User:
    """The SDK's redirect_handler ("open the browser") and callback_handler."""

    def __init__(self, args: argparse.Namespace, callback: Callback) -> None:
        self.args = args
        self.callback = callback
        self.signins: list[dict[str, Any]] = []
        self.error: str | None = None

    async def redirect_handler(self, authorization_url: str) -> None:
        self.callback.arrived.clear()
        async with httpx.AsyncClient(timeout=60) as plain:
            res = await plain.post(
                f"{self.args.browser}/signin",
                json={"authorizationUrl": authorization_url, "redirectUri": self.callback.uri, "login": self.args.login, "label": LABEL, "timeoutMs": 40000},
            )
        browser = res.json()
        params = None
        if browser.get("ok") and await anyio.to_thread.run_sync(self.callback.arrived.wait, 5):
            params = dict(self.callback.params)
        self.signins.append({"authorization_url": authorization_url, "browser": browser, "params": params})
        if not browser.get("ok"):
            path = " | ".join(f"{n['method']} {n['url'].split('?')[0]} {n.get('status', '')}" for n in browser.get("navigations", []))
            self.error = f"the browser did not come back to the client: {browser.get('error')}; path: {path}"
            raise CheckFailed(self.error)
        if not params:
            self.error = "the browser reached the redirect URI but the loopback listener got nothing"
            raise CheckFailed(self.error)

    async def callback_handler(self) -> Any:
        p = self.signins[-1]["params"] or {}
        check(not p.get("error"), f"toolgate answered error={p.get('error')}: {p.get('error_description')}")
        if SDK_MAJOR >= 2:
            return AuthorizationCodeResult(code=p.get("code", ""), state=p.get("state"), iss=p.get("iss"))
        return p.get("code", ""), p.get("state")


async def post_initialize(url: str, token: str | None) -> tuple[int, str]:
    headers = {"accept": "application/json, text/event-stream"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(timeout=30) as plain:
        # initialize: a request any MCP server answers 200 to when the token is accepted
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "expiry-probe", "version": "1"}}
        res = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}, headers=headers)
        return res.status_code, res.headers.get("www-authenticate", "")


async def run(args: argparse.Namespace) -> None:
    url, issuer = args.url, args.issuer
    cimd = args.registration == "cimd"
    client_name = args.client_name or f"toolgate e2e Python {SDK_MAJOR}.x ({'metadata document' if cimd else 'registered'})"
    state: dict[str, Any] = {}

    async def discovery() -> str:
        status, www = await post_initialize(url, None)
        check(status == 401, f"POST {url} without a token answered {status}, wanted 401")
        check('resource_metadata="' in www, f"no resource_metadata in the challenge: {www}")
        prm_url = www.split('resource_metadata="', 1)[1].split('"', 1)[0]
        async with httpx.AsyncClient(timeout=30) as plain:
            prm = (await plain.get(prm_url)).json()
            check(prm.get("resource") == url, f"PRM resource {prm.get('resource')}, wanted {url}")
            check(prm.get("authorization_servers") == [issuer], f"PRM authorization_servers {prm.get('authorization_servers')}, wanted [{issuer}]")
            res = await plain.get(f"{issuer}/.well-known/oauth-authorization-server")
            check(res.status_code == 200, f"GET {issuer}/.well-known/oauth-authorization-server answered {res.status_code}")
            meta = res.json()
        check(meta.get("issuer") == issuer, f"metadata issuer {meta.get('issuer')!r}, wanted {issuer!r}")
        check(meta.get("code_challenge_methods_supported") == ["S256"], f"code_challenge_methods_supported {meta.get('code_challenge_methods_supported')}")
        check(meta.get("client_id_metadata_document_supported") is True, "client_id_metadata_document_supported is not true")
        state["meta"] = meta
        return f"issuer {meta['issuer']}"

    await step("discovery: 401 -> protected-resource metadata -> authorization server metadata", discovery)
    meta = state["meta"]

    callback = Callback()
    user = User(args, callback)
    storage = Memory()
    trace = Trace()
    metadata = OAuthClientMetadata(
        client_name=client_name,
        redirect_uris=[callback.uri],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    kw = {"client_metadata_url": args.client_metadata_url} if cimd else {}
    provider = OAuthClientProvider(url, metadata, storage, user.redirect_handler, user.callback_handler, **kw)
    timeout = httpx.Timeout(30.0, read=60.0)
    async with httpx.AsyncClient(auth=provider, timeout=timeout, event_hooks={"response": [trace.hook]}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:

                async def signin() -> str:
                    try:
                        with anyio.fail_after(60):
                            await session.initialize()
                    except BaseException as e:  # the SDK may end in a timeout: say what the browser saw
                        if user.error:
                            raise CheckFailed(user.error) from e
                        raise
                    check(len(user.signins) == 1, f"the SDK sent the user to sign in {len(user.signins)} times")
                    s = user.signins[0]
                    browser, params = s["browser"], s["params"] or {}
                    q = {k: v[0] for k, v in parse_qs(urlsplit(s["authorization_url"]).query).items()}
                    check(s["authorization_url"].split("?")[0] == meta["authorization_endpoint"], f"authorization URL {s['authorization_url'].split('?')[0]}, wanted {meta['authorization_endpoint']}")
                    check(q.get("code_challenge_method") == "S256" and q.get("code_challenge"), "the authorization request has no S256 PKCE")
                    check(q.get("resource") == url, f"the authorization request's resource {q.get('resource')}, wanted {url}")
                    client_id = storage.client_info.client_id if storage.client_info else None
                    check(q.get("client_id") == client_id, f"client_id {q.get('client_id')} in the authorization request, the SDK holds {client_id}")
                    if cimd:
                        check(client_id == args.client_metadata_url, f"client_id {client_id}, wanted the metadata document URL {args.client_metadata_url}")
                        check(not any(m == "POST" and u == meta.get("registration_endpoint") for m, u, _, _ in trace.entries), "the SDK registered although the server supports metadata documents")
                    else:
                        check(client_id and not client_id.startswith("https://"), f"registered client_id {client_id}")
                        trace.expect([("POST <registration_endpoint> -> 201", lambda m, u, st, g: m == "POST" and u == meta.get("registration_endpoint") and st == 201)])
                    idp = browser.get("idpAuthorization") or {}
                    ip = idp.get("params", {})
                    check(idp.get("endpoint") == f"{args.idp_issuer}/auth", f"toolgate sent the user to {idp.get('endpoint')}, wanted {args.idp_issuer}/auth")
                    check(ip.get("client_id") == "toolgate", f"client_id {ip.get('client_id')} at the provider, wanted toolgate")
                    check(ip.get("redirect_uri") == f"{issuer}/oauth/callback", f"redirect_uri {ip.get('redirect_uri')} at the provider")
                    check(ip.get("code_challenge_method") == "S256" and ip.get("code_challenge") and ip.get("nonce"), "no S256 PKCE or no nonce at the provider")
                    check("openid" in (ip.get("scope") or "").split(), f"scope {ip.get('scope')} at the provider lacks openid")
                    check("resource" not in ip, f"toolgate passed resource={ip.get('resource')} on to the provider")
                    steps = browser.get("steps", [])
                    check(steps[:1] == ["idp-login"] and "consent" in steps, f"the user's steps were {steps}")
                    check(params.get("code"), "no code in the redirect")
                    check(params.get("iss") == issuer, f"iss {params.get('iss')} in the redirect, wanted {issuer} (RFC 9207)")
                    trace.expect([("POST <token_endpoint> [authorization_code] -> 200", lambda m, u, st, g: m == "POST" and u == meta["token_endpoint"] and g == "authorization_code" and st == 200)])
                    return f"{' -> '.join(steps)}, {browser.get('ms')} ms in the browser"

                await step(f"sign-in with {'a Client ID Metadata Document' if cimd else 'dynamic registration'} through the browser", signin)

                async def consent_page() -> None:
                    c = user.signins[0]["browser"].get("consent") or {}
                    text = c.get("text", "")
                    check(client_name in text, f"the consent page does not name the client {client_name!r}: {text[:400]!r}")
                    check("mcp:tools" in text, f"the consent page does not show mcp:tools: {text[:400]!r}")
                    check(c.get("csp"), "the consent page has no Content-Security-Policy")

                await step("toolgate's consent page: the client, the scope, CSP", consent_page, soft=True)

                async def token() -> str:
                    t = storage.tokens
                    check(t and t.access_token and t.refresh_token, "no access token or no refresh token saved")
                    async with httpx.AsyncClient(timeout=30) as plain:
                        jwks = (await plain.get(meta["jwks_uri"])).json()
                    header = jwt.get_unverified_header(t.access_token)
                    check(header.get("alg") == "ES256" and header.get("typ") == "at+jwt", f"alg {header.get('alg')} typ {header.get('typ')}, wanted ES256 at+jwt (RFC 9068)")
                    key = next((k for k in jwks.get("keys", []) if k.get("kid") == header.get("kid")), None)
                    check(key, f"kid {header.get('kid')} is not in {meta['jwks_uri']}")
                    claims = jwt.decode(t.access_token, jwt.PyJWK(key).key, algorithms=["ES256"], audience=url, issuer=issuer)
                    check("mcp:tools" in (claims.get("scope") or "").split(), f"scope {claims.get('scope')!r} lacks mcp:tools")
                    check(claims.get("client_id") == storage.client_info.client_id, f"client_id {claims.get('client_id')}")
                    check(claims["exp"] - claims.get("iat", 0) <= 30, f"lifetime {claims['exp'] - claims.get('iat', 0)} s, wanted <= 30")
                    state["claims"], state["first"] = claims, t
                    return f"sub {claims.get('sub')}, kid {header.get('kid')}"

                await step("token: code redeemed for an ES256 JWT of toolgate (JWKS), a refresh token", token)

                async def call_sum() -> str:
                    result = (await session.call_tool("calculate_sum", {"a": 2, "b": 3})).model_dump(mode="json", by_alias=True)
                    text = "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
                    check(not result.get("isError") and text == "5", f"calculate_sum {{a:2,b:3}} answered {result}")
                    return ""

                async def tools() -> str:
                    listed = await session.list_tools()
                    names = [t.name for t in listed.tools]
                    check("calculate_sum" in names, f"tools/list lacks calculate_sum: {names}")
                    await call_sum()
                    return f"{len(names)} tools"

                await step("tools/list and calculate_sum = 5", tools)

                async def expiry() -> str:
                    deadline = time.time() + args.expiry_max
                    exp = state["claims"]["exp"]
                    await anyio.sleep(max(0.0, exp + 1 - time.time()))  # nothing to ask before exp
                    while True:
                        status, _ = await post_initialize(url, state["first"].access_token)
                        if status == 401:
                            return f"refused {round(time.time() - exp)} s after exp"
                        check(status == 200, f"HTTP {status} for initialize with the token {round(time.time() - exp)} s after exp, wanted 200 (leeway) or 401")
                        check(time.time() < deadline, f"still accepted (HTTP {status}) {round(time.time() - exp)} s after exp")
                        await anyio.sleep(2)

                await step("the access token is refused once expired", expiry)

                async def refresh() -> str:
                    start = len(trace.entries)
                    await call_sum()
                    trace.expect([
                        ("POST <token_endpoint> [refresh_token] -> 200", lambda m, u, st, g: m == "POST" and u == meta["token_endpoint"] and g == "refresh_token" and st == 200),
                        (f"POST {url} -> 200", lambda m, u, st, g: m == "POST" and u == url and st == 200),
                    ], start)
                    check(len(user.signins) == 1, f"the user was sent to sign in again ({len(user.signins)} sign-ins)")
                    now, first = storage.tokens, state["first"]
                    check(now.access_token != first.access_token, "the access token did not change")
                    check(now.refresh_token and now.refresh_token != first.refresh_token, "the refresh token was not rotated")
                    claims = jwt.decode(now.access_token, options={"verify_signature": False})
                    check(claims.get("sub") == state["claims"].get("sub"), f"the new token's sub {claims.get('sub')}")
                    return "proactive, before sending" if not any(st == 401 for _, _, st, _ in trace.entries[start:]) else "after a 401"

                await step("refresh: refresh_token grant -> new tokens -> calculate_sum = 5", refresh)


def main() -> int:
    global LABEL
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--idp-issuer", required=True)
    p.add_argument("--browser", required=True)
    p.add_argument("--registration", choices=["dcr", "cimd"], required=True)
    p.add_argument("--client-metadata-url")
    p.add_argument("--client-name")
    p.add_argument("--label")
    p.add_argument("--login", default="alice")
    p.add_argument("--expiry-max", type=float, default=120)
    p.add_argument("--timeout", type=float, default=150)
    args = p.parse_args()
    if args.registration == "cimd" and not args.client_metadata_url:
        p.error("--registration cimd needs --client-metadata-url")
    LABEL = args.label or f"py{SDK_MAJOR}-{args.registration}"

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args)

    def leaves(e: BaseException) -> list[BaseException]:
        return [x for sub in e.exceptions for x in leaves(sub)] if isinstance(e, BaseExceptionGroup) else [e]

    def stops_only(e: BaseException) -> bool:
        # A failed step (already reported), and the SDK's tasks cancelled because of it.
        found = leaves(e)
        return any(isinstance(x, Stop) for x in found) and all(isinstance(x, (Stop, anyio.get_cancelled_exc_class())) for x in found)

    try:
        anyio.run(bounded)
    except BaseException as e:  # noqa: BLE001 - the SDK's task groups raise ExceptionGroups
        if stops_only(e):
            return 1
        traceback.print_exc(file=sys.stderr)
        report(False, "finished", f": {type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'the run took too long (--timeout)'}")
        return 1
    log(f"done (python mcp {SDK_VERSION})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
