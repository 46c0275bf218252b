#!/usr/bin/env python3
"""The "notes" SaaS service's MCP server for tests/e2e/connect.sh: an OAuth-protected resource
server written with the official Python SDK's FastMCP (PyPI mcp 1.30.0, py-mcp1 venv of
tests/e2e/setup.sh) over Streamable HTTP at http://127.0.0.1:PORT/mcp. It checks its own tokens:
every bearer token is introspected (RFC 7662) at its own authorization server
(tests/e2e/connect/notes_as.mjs) with its own client notes-rs, and accepted only when active,
issued to toolgate's client there (--client-id), for this server (aud = its URL, RFC 8707) with
the scope `notes`. Anything else: 401 with WWW-Authenticate naming its protected-resource
metadata (RFC 9728, served by FastMCP at /.well-known/oauth-protected-resource/mcp).

    $HARNESS_DIR/py-mcp1/bin/python tests/e2e/connect/notes_server.py --issuer-file F --rs-secret R \
        [--client-id toolgate-notes]

It binds 127.0.0.1 on a free port first and prints {"url": "http://127.0.0.1:PORT/mcp", "port": N}
as its first line on stdout; then it waits (up to 30 s) for --issuer-file to hold its
authorization server's issuer (that server needs this URL as its resource first), and serves.
A second stdout line {"ready": true} says it does.

Tools (per account at the service: the token's `sub`):
  whoami()     the token's sub
  my_notes()   the notes of that account: octo-alice and octo-bob have their own, anyone else none;
               a client-credentials token (no sub) has no notes

On stderr, one line per bearer token received (never the token):
  [notes] bearer {"digest": sha256 prefix (16 hex), "active": ..., "client_id": ..., "sub": ...,
                  "aud": ..., "scope": ..., "accepted": true|false, "why": ...}
and one `[notes] call {"tool": ..., "sub": ..., "digest": ...}` line per tool call.
"""

import argparse
import hashlib
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP

NOTES = {
    "octo-alice": ["alice: buy oat milk", "alice: review PR 42"],
    "octo-bob": ["bob: book the dentist", "bob: rotate the lab keys", "bob: call grandma"],
}


def log(kind: str, fields: dict[str, Any]) -> None:
    print(f"[notes] {kind} {json.dumps(fields, sort_keys=True)}", file=sys.stderr, flush=True)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


class Introspection:
    """A TokenVerifier: RFC 7662 introspection at the service's own authorization server."""

    def __init__(self, issuer: str, resource: str, rs_secret: str, client_id: str) -> None:
        self.endpoint = f"{issuer}/token/introspection"
        self.issuer = issuer
        self.resource = resource
        self.auth = ("notes-rs", rs_secret)
        self.client_id = client_id

    async def verify_token(self, token: str) -> AccessToken | None:
        entry: dict[str, Any] = {"digest": digest(token)}
        try:
            async with httpx.AsyncClient(timeout=10) as http:
                res = await http.post(self.endpoint, data={"token": token}, auth=self.auth)
            body = res.json() if res.status_code == 200 else {}
            aud = body.get("aud")
            auds = aud if isinstance(aud, list) else [aud] if aud else []
            scopes = (body.get("scope") or "").split()
            entry.update(status=res.status_code, active=body.get("active"), client_id=body.get("client_id"), sub=body.get("sub"), aud=aud, scope=body.get("scope"), iss=body.get("iss"))
            why = None
            if res.status_code != 200:
                why = f"introspection answered {res.status_code}"
            elif body.get("active") is not True:
                why = "not active (not a token of this service's authorization server, or expired/revoked)"
            elif body.get("iss") != self.issuer:
                why = f"iss {body.get('iss')}"
            elif body.get("client_id") != self.client_id:
                why = f"issued to {body.get('client_id')}, not {self.client_id}"
            elif self.resource not in auds:
                why = f"audience {aud}, not {self.resource}"
            elif "notes" not in scopes:
                why = f"scope {body.get('scope')} lacks notes"
            entry.update(accepted=why is None, why=why)
            log("bearer", entry)
            if why:
                return None
            return AccessToken(
                token=token,
                client_id=body["client_id"],
                scopes=scopes,
                expires_at=body.get("exp"),
                resource=self.resource,
                subject=body.get("sub"),
            )
        except Exception as e:  # noqa: BLE001 - a verifier never raises: the token is refused
            entry.update(accepted=False, why=f"{type(e).__name__}: {e}")
            log("bearer", entry)
            return None


def who() -> tuple[str | None, str]:
    token = get_access_token()
    if token is None:  # never: the bearer middleware refuses unauthenticated requests
        raise RuntimeError("no access token")
    return token.subject, digest(token.token)


def build(url: str, issuer: str, args: argparse.Namespace) -> FastMCP:
    mcp = FastMCP(
        "notes",
        instructions="A user's notes at the notes service.",
        log_level="WARNING",
        token_verifier=Introspection(issuer, url, args.rs_secret, args.client_id),
        auth=AuthSettings(issuer_url=issuer, resource_server_url=url, required_scopes=["notes"], validate_token_resource=True),
    )

    @mcp.tool()
    def whoami() -> str:
        """The account at the notes service the caller's token is for."""
        sub, d = who()
        log("call", {"tool": "whoami", "sub": sub, "digest": d})
        return sub or "(no account: a client token)"

    @mcp.tool()
    def my_notes() -> str:
        """The caller's own notes, one a line."""
        sub, d = who()
        log("call", {"tool": "my_notes", "sub": sub, "digest": d})
        notes = NOTES.get(sub or "", [])
        return "\n".join(notes) if notes else f"(no notes for {sub})"

    return mcp


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--issuer-file", required=True, type=Path)
    p.add_argument("--rs-secret", required=True)
    p.add_argument("--client-id", default="toolgate-notes")
    args = p.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/mcp"
    print(json.dumps({"url": url, "port": port}), flush=True)

    deadline = time.time() + 30
    issuer = ""
    while time.time() < deadline:
        if args.issuer_file.exists():
            issuer = args.issuer_file.read_text().strip()
            if issuer:
                break
        time.sleep(0.1)
    if not issuer:
        print(f"no issuer in {args.issuer_file} within 30 s", file=sys.stderr)
        sys.exit(1)

    mcp = build(url, issuer, args)
    app = mcp.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    print(json.dumps({"ready": True, "issuer": issuer}), flush=True)
    print(f"[notes] {url} serving, tokens introspected at {issuer}", file=sys.stderr, flush=True)
    anyio.run(lambda: server.serve(sockets=[sock]))


if __name__ == "__main__":
    main()
