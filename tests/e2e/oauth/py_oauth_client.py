#!/usr/bin/env python3
"""OAuth end to end with the official MCP Python SDK (PyPI `mcp`, 1.x or 2.x), against toolgate in
auth mode "jwt" and the authorization server of tests/e2e/oauth/as.mjs. Driven by
tests/e2e/oauth.sh; run it with the interpreter of a venv made by tests/e2e/setup.sh:

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/oauth/py_oauth_client.py \\
        --url http://127.0.0.1:P/mcp --issuer http://127.0.0.1:Q --scenario client-credentials

Scenarios (a fresh process each, starting without a token; the SDK's own httpx auth flow does all
of the OAuth work, as the `auth` of the httpx client the Streamable HTTP transport uses):
  client-credentials  ClientCredentialsOAuthProvider (mcp.client.auth.extensions): 401 -> protected-
                      resource metadata -> authorization-server metadata -> token (client_credentials,
                      resource = the metadata's resource) -> calculate_sum {a:2,b:3} = "5"
  authorization-code  OAuthClientProvider: the same discovery, dynamic client registration, then
                      authorization code + PKCE; redirect_handler follows the authorization URL with
                      a cookie-keeping httpx client (the AS logs in and consents automatically) and
                      callback_handler returns the code, state (and iss) from the final redirect

Every HTTP exchange of the SDK's client is recorded and its order asserted, and the token's header
and claims are checked. Prints one JSON line; exit status 0 only if every check passed.
"""

import argparse
import base64
import importlib.metadata
import json
import sys
import time
import traceback
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])
if SDK_MAJOR >= 2:  # 2.x ships its own httpx fork and returns the callback as a model
    import httpx2 as httpx
    from mcp.shared.auth import AuthorizationCodeResult
else:
    import httpx

SCENARIOS = ["client-credentials", "authorization-code"]
REDIRECT_URI = "http://127.0.0.1:8976/callback"  # never listened on: the code is read from the Location


class CheckFailed(Exception):
    pass


def check(ok: Any, message: str) -> None:
    if not ok:
        raise CheckFailed(message)


def log(*parts: Any) -> None:
    print("[py-oauth]", *parts, file=sys.stderr, flush=True)


class Memory:
    """TokenStorage in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class Trace:
    """Records every exchange of the SDK's httpx client (auth flow included)."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, int]] = []

    async def hook(self, response: Any) -> None:
        request = response.request
        url = str(request.url)
        self.entries.append((request.method, url, response.status_code))
        www = response.headers.get("www-authenticate")
        log(f"{request.method} {url} -> {response.status_code}" + (f" ({www})" if www else ""))

    def expect(self, steps: list[tuple[str, Any]]) -> None:
        at = 0
        for what, test in steps:
            found = next((i for i in range(at, len(self.entries)) if test(*self.entries[i])), None)
            shown = " | ".join(f"{m} {u} {s}" for m, u, s in self.entries)
            check(found is not None, f"the SDK's HTTP exchanges lack, after #{at}: {what}; trace: {shown}")
            at = found + 1


def decode_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    parts = token.split(".")
    check(len(parts) == 3, f"the access token is not a JWS compact serialization ({len(parts)} parts)")
    dec = [json.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in parts[:2]]
    return dec[0], dec[1]


def check_token(token: str, issuer: str, aud: str, scopes: list[str], sub: str | None) -> dict[str, Any]:
    header, payload = decode_jwt(token)
    check(header.get("alg") == "RS256", f"token alg {header.get('alg')}, wanted RS256")
    check(header.get("typ") == "at+jwt", f"token typ {header.get('typ')}, wanted at+jwt")
    check(payload.get("iss") == issuer, f"token iss {payload.get('iss')}, wanted {issuer}")
    auds = payload.get("aud") if isinstance(payload.get("aud"), list) else [payload.get("aud")]
    check(auds == [aud], f"token aud {payload.get('aud')}, wanted {aud}")
    granted = sorted((payload.get("scope") or "").split())
    check(granted == sorted(scopes), f"token scope {payload.get('scope')!r}, wanted {' '.join(scopes)!r}")
    if sub is not None:
        check(payload.get("sub") == sub, f"token sub {payload.get('sub')}, wanted {sub}")
    check(payload.get("exp", 0) > time.time(), "token already expired")
    return payload


class UserAgent:
    """Plays the user's browser for the SDK's redirect_handler / callback_handler: follows the
    authorization URL, keeping the AS's cookies, until the AS redirects to REDIRECT_URI."""

    def __init__(self) -> None:
        self.authorization_url: str | None = None
        self.params: dict[str, str] = {}

    async def redirect_handler(self, authorization_url: str) -> None:
        self.authorization_url = authorization_url
        url = authorization_url
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
            for _ in range(10):
                res = await browser.get(url)
                location = res.headers.get("location")
                check(300 <= res.status_code < 400 and location, f"authorization stopped at {url} with HTTP {res.status_code}: {res.text[:300]}")
                nxt = urljoin(url, location)
                log(f"user agent: {urlsplit(url).path} -> {res.status_code} {nxt.split('?')[0]}")
                if nxt.split("?")[0] == REDIRECT_URI:
                    self.params = {k: v[0] for k, v in parse_qs(urlsplit(nxt).query).items()}
                    check("error" not in self.params, f"the AS answered {self.params}")
                    return
                url = nxt
        raise CheckFailed("authorization did not come back to the redirect URI within 10 redirects")

    async def callback_handler(self) -> Any:
        code, state, iss = self.params.get("code", ""), self.params.get("state"), self.params.get("iss")
        if SDK_MAJOR >= 2:
            return AuthorizationCodeResult(code=code, state=state, iss=iss)
        return code, state


async def call_sum(url: str, auth: Any, trace: Trace) -> None:
    async with httpx.AsyncClient(auth=auth, timeout=httpx.Timeout(30.0, read=60.0), event_hooks={"response": [trace.hook]}) as http:
        async with streamable_http_client(url, http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = (await session.call_tool("calculate_sum", {"a": 2, "b": 3})).model_dump(mode="json", by_alias=True)
                text = "".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
                check(not result.get("isError") and text == "5", f"calculate_sum {{a:2,b:3}} answered {result}")


async def run(args: argparse.Namespace, out: dict[str, Any]) -> None:
    url, issuer = args.url, args.issuer
    same = lambda u, origin: urlsplit(u).netloc == urlsplit(origin).netloc  # noqa: E731
    # What toolgate announces, read first without the SDK so a failure says which side is wrong.
    async with httpx.AsyncClient(timeout=30) as plain:
        res = await plain.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={"accept": "application/json, text/event-stream"})
        check(res.status_code == 401, f"POST {url} without a token answered {res.status_code}, wanted 401")
        www = res.headers.get("www-authenticate", "")
        prm_url = www.split('resource_metadata="', 1)[1].split('"', 1)[0] if 'resource_metadata="' in www else ""
        check(prm_url, f"401 challenge without resource_metadata: {www}")
        prm = (await plain.get(prm_url)).json()
        check(prm.get("resource") == url and prm.get("authorization_servers") == [issuer], f"protected-resource metadata: {prm}")
    out["passed"].append("401 challenge and protected-resource metadata")

    trace = Trace()
    storage = Memory()
    steps = [
        (f"POST {url} -> 401", lambda m, u, s: m == "POST" and u == url and s == 401),
        (f"GET {prm_url} -> 200", lambda m, u, s: m == "GET" and u == prm_url and s == 200),
        (
            "GET <issuer>/.well-known/... -> 200",
            lambda m, u, s: m == "GET" and s == 200 and same(u, issuer) and "/.well-known/" in u,
        ),
    ]
    if args.scenario == "client-credentials":
        kw = {"scopes" if SDK_MAJOR < 2 else "scope": "mcp:tools"}
        provider = ClientCredentialsOAuthProvider(url, storage, client_id=args.client_id, client_secret=args.client_secret, issuer=issuer, **kw)
        await call_sum(url, provider, trace)
        trace.expect(steps + [
            ("POST <token_endpoint> -> 200", lambda m, u, s: m == "POST" and s == 200 and same(u, issuer) and urlsplit(u).path == "/token"),
            (f"POST {url} -> 200", lambda m, u, s: m == "POST" and u == url and s == 200),
        ])
        out["passed"].append("SDK discovery: 401 -> PRM -> AS metadata -> token (client_credentials) -> 200")
        check_token(storage.tokens.access_token, issuer, prm["resource"], ["mcp:tools"], args.client_id)
    else:
        agent = UserAgent()
        metadata = OAuthClientMetadata(
            client_name="toolgate-e2e-py-interactive",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        )
        provider = OAuthClientProvider(url, metadata, storage, agent.redirect_handler, agent.callback_handler)
        await call_sum(url, provider, trace)
        trace.expect(steps + [
            ("POST <registration_endpoint> -> 201", lambda m, u, s: m == "POST" and s == 201 and same(u, issuer)),
            ("POST <token_endpoint> -> 200", lambda m, u, s: m == "POST" and s == 200 and same(u, issuer) and urlsplit(u).path == "/token"),
            (f"POST {url} -> 200", lambda m, u, s: m == "POST" and u == url and s == 200),
        ])
        q = {k: v[0] for k, v in parse_qs(urlsplit(agent.authorization_url or "").query).items()}
        check(q.get("resource") == prm["resource"], f"authorization request resource={q.get('resource')}, wanted {prm['resource']}")
        # mcp 2.x adds offline_access (for a refresh token) when the AS lists it in scopes_supported.
        asked = set((q.get("scope") or "").split())
        check(asked in ({"mcp:tools"}, {"mcp:tools", "offline_access"}), f"authorization request scope={q.get('scope')}, wanted mcp:tools")
        out["requestedScope"] = q.get("scope")
        check(q.get("code_challenge_method") == "S256" and q.get("code_challenge"), "authorization request without PKCE S256")
        out["passed"].append("SDK discovery: 401 -> PRM -> AS metadata -> registration -> authorize (PKCE, resource) -> token -> 200")
        claims = check_token(storage.tokens.access_token, issuer, prm["resource"], ["mcp:tools"], "alice")
        check(claims.get("client_id") == storage.client_info.client_id, "token client_id is not the registered client")
    out["passed"].append("token: RS256 at+jwt, iss, aud = resource, scope mcp:tools")
    out["passed"].append("calculate_sum = 5")


def errors_of(e: BaseException) -> list[str]:
    if isinstance(e, BaseExceptionGroup):
        return [m for sub in e.exceptions for m in errors_of(sub)]
    if isinstance(e, CheckFailed):
        return [str(e)]
    if isinstance(e, TimeoutError) and not str(e):
        return ["TimeoutError: the run took too long (--timeout)"]
    return [f"{type(e).__name__}: {e}"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", required=True)
    p.add_argument("--issuer", required=True)
    p.add_argument("--scenario", choices=SCENARIOS, required=True)
    p.add_argument("--client-id", default="mcp-m2m")
    p.add_argument("--client-secret", default="mcp-m2m-secret")
    p.add_argument("--timeout", type=float, default=60)
    args = p.parse_args()
    out: dict[str, Any] = {"client": f"python-mcp-{SDK_VERSION}", "scenario": args.scenario, "passed": [], "errors": []}

    async def bounded() -> None:
        with anyio.fail_after(args.timeout):
            await run(args, out)

    try:
        anyio.run(bounded)
    except Exception as e:  # includes ExceptionGroups from the SDK's task groups
        out["errors"] = errors_of(e)
        traceback.print_exc(file=sys.stderr)
    out["ok"] = not out["errors"]
    print(json.dumps(out, separators=(",", ":")), flush=True)
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
