#!/usr/bin/env python3
"""A minimal token issuer for the full-stack benchmark (benches/run.sh), standard library only.

Makes an RSA-2048 key with the openssl command line, writes an RS256 access token for the given
resource to DIR/token, and serves the public key as a JWKS document at
http://127.0.0.1:PORT/jwks until killed. With --port 0 it takes a free port and writes it to
DIR/port (before the token, so a reader that sees the token also finds the port). toolgate fetches the keys from there and verifies the
token's signature, issuer, audience, expiry and scope, exactly as it would a real identity
provider's.

    benches/issuer.py --dir /tmp/x --port 0 --resource http://127.0.0.1:18791/mcp
"""

import argparse
import base64
import http.server
import json
import subprocess
import time
from pathlib import Path


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, type=Path)
    ap.add_argument("--port", required=True, type=int)
    ap.add_argument("--resource", required=True)
    ap.add_argument("--scope", default="mcp:tools")
    ap.add_argument("--ttl", type=int, default=6 * 3600)
    a = ap.parse_args()
    a.dir.mkdir(parents=True, exist_ok=True)
    key = a.dir / "issuer-key.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key)],
                   check=True, capture_output=True)
    modulus = subprocess.run(["openssl", "rsa", "-in", str(key), "-noout", "-modulus"],
                             check=True, capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    body = b""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            if self.path != "/jwks":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    # Bound first: the issuer's URL names the port, and a token whose keys nobody serves
    # would only fail later.
    server = http.server.ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    port = server.server_address[1]
    (a.dir / "port").write_text(str(port))
    issuer = f"http://127.0.0.1:{port}"
    jwks = {"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "bench",
                      "n": b64url(bytes.fromhex(modulus)), "e": b64url((65537).to_bytes(3, "big"))}]}
    now = int(time.time())
    header = b64url(json.dumps({"alg": "RS256", "typ": "at+jwt", "kid": "bench"}).encode())
    claims = b64url(json.dumps({"iss": issuer, "sub": "bench-client", "aud": a.resource, "iat": now,
                                "exp": now + a.ttl, "scope": a.scope, "client_id": "bench-client"}).encode())
    signing_input = f"{header}.{claims}".encode()
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(key), "-binary"], input=signing_input,
                               check=True, capture_output=True).stdout
    body = json.dumps(jwks).encode()
    (a.dir / "token").write_text(f"{header}.{claims}.{b64url(signature)}")
    server.serve_forever()


if __name__ == "__main__":
    main()
