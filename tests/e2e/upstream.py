#!/usr/bin/env python3
"""A stand-in for the REST APIs the example tools in deploy/tools/ wrap, on a loopback port.

    python3 tests/e2e/upstream.py --token SECRET    # prints the port on the first line

GET  /v1/forecast?latitude=..&longitude=..   a weather forecast shaped like Open-Meteo's
POST /repos/{owner}/{repo}/issues            creates an issue, GitHub-style; needs
                                             `Authorization: Bearer SECRET`
Every request is appended to --log as one JSON line (method, path, headers), so a test can check
what the server really sent.
"""

import argparse
import json
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ISSUES = re.compile(r"^/repos/([^/]+)/([^/]+)/issues$")


def make_handler(token: str, log_path: str | None):
    issues: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet: the test reads --log instead
            pass

        def record(self, body: object) -> None:
            if log_path:
                with open(log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}) + "\n")

        def reply(self, status: int, payload: object) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            self.record(None)
            if url.path != "/v1/forecast":
                return self.reply(404, {"error": "not found"})
            q = parse_qs(url.query)
            try:
                lat, lon = float(q["latitude"][0]), float(q["longitude"][0])
            except (KeyError, ValueError):
                return self.reply(400, {"error": True, "reason": "latitude and longitude are required numbers"})
            self.reply(200, {
                "latitude": lat,
                "longitude": lon,
                "timezone": "GMT",
                "current": {"time": "2026-11-21T10:00", "temperature_2m": 7.5, "wind_speed_10m": 12.1, "weather_code": 3},
                "current_units": {"temperature_2m": "°C", "wind_speed_10m": "km/h"},
            })

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = None
            self.record(body)
            m = ISSUES.match(urlsplit(self.path).path)
            if not m:
                return self.reply(404, {"message": "Not Found"})
            if self.headers.get("authorization") != f"Bearer {token}":
                return self.reply(401, {"message": "Bad credentials"})
            if not isinstance(body, dict) or not body.get("title"):
                return self.reply(422, {"message": "Validation Failed", "errors": [{"field": "title", "code": "missing_field"}]})
            number = len(issues) + 1
            issue = {"number": number, "title": body["title"], "state": "open", "html_url": f"https://github.example/{m[1]}/{m[2]}/issues/{number}"}
            issues.append(issue)
            self.reply(201, issue)

    return Handler


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--token", required=True, help="the bearer token POST requests must carry")
    p.add_argument("--log", help="append every request to this file as JSON lines")
    args = p.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args.token, args.log))
    print(server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
