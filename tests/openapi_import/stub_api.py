#!/usr/bin/env python3
"""A stand-in for the Swagger Petstore on a loopback port, for tests/openapi_import.sh.

    python3 tests/openapi_import/stub_api.py --key SECRET --log requests.jsonl   # prints the port

GET /v2/pet/{id} answers a pet shaped like the Petstore's `Pet` schema when the request carries
`api_key: SECRET` (the document's `api_key` security scheme), 401 otherwise; anything else is
404. Every request is appended to --log as one JSON line (method, path, headers).
"""

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PET = re.compile(r"^/v2/pet/(\d+)$")


def make_handler(key: str, log_path: str):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet: the test reads --log instead
            pass

        def reply(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"method": "GET", "path": self.path, "headers": dict(self.headers)}) + "\n")
            match = PET.match(self.path)
            if not match:
                return self.reply(404, {"code": 404, "message": "not found"})
            if self.headers.get("api_key") != key:
                return self.reply(401, {"code": 401, "message": "api_key missing or wrong"})
            pet_id = int(match.group(1))
            self.reply(200, {"id": pet_id, "name": f"doggie-{pet_id}", "photoUrls": [], "status": "available"})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--key", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.key, args.log))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
