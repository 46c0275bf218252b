#!/usr/bin/env python3
"""Calls one tool over MCP Streamable HTTP with nothing but the standard library, for
tests/openapi_import.sh: initialize, tools/list (the tool must be listed), tools/call.

    python3 tests/openapi_import/mcp_call.py --url http://127.0.0.1:PORT/mcp --token T \
        --tool getPetById --args '{"petId": 7}' --expect doggie-7

Prints `PASS <check>` or `FAIL <check>: <why>` lines; exits 1 when a check failed.
"""

import argparse
import json
import sys
import urllib.error
import urllib.request

PROTOCOL = "2025-06-18"


class Client:
    def __init__(self, url: str, token: str) -> None:
        self.url, self.token, self.session, self.next_id = url, token, None, 1

    def post(self, message: dict) -> dict | None:
        headers = {
            "authorization": f"Bearer {self.token}",
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if self.session:
            headers["mcp-session-id"] = self.session
            headers["mcp-protocol-version"] = PROTOCOL
        request = urllib.request.Request(self.url, data=json.dumps(message).encode(), headers=headers, method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            self.session = response.headers.get("mcp-session-id") or self.session
            body = response.read().decode()
            if response.status == 202 or not body:
                return None
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                # The answer is the event whose data carries our id.
                for line in body.splitlines():
                    if line.startswith("data:"):
                        data = json.loads(line[5:])
                        if data.get("id") == message.get("id"):
                            return data
                raise RuntimeError(f"no answer in the event stream: {body[:300]}")
            return json.loads(body)

    def request(self, method: str, params: dict) -> dict:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        answer = self.post(message)
        if answer is None or "error" in answer:
            raise RuntimeError(f"{method}: {answer}")
        return answer["result"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--args", default="{}")
    parser.add_argument("--expect", required=True, help="text the tool's result must contain")
    args = parser.parse_args()
    client = Client(args.url, args.token)
    failed = 0

    def check(name: str, ok: bool, why: str = "") -> None:
        nonlocal failed
        print(f"PASS {name}" if ok else f"FAIL {name}: {why}", flush=True)
        failed += 0 if ok else 1

    try:
        init = client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "openapi-import-check", "version": "1"}})
        check("initialize", "serverInfo" in init, json.dumps(init)[:200])
        client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        names, cursor = [], None
        while True:
            page = client.request("tools/list", {"cursor": cursor} if cursor else {})
            names += [t["name"] for t in page["tools"]]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        check(f"tools/list lists {args.tool}", args.tool in names, f"listed: {names}")
        result = client.request("tools/call", {"name": args.tool, "arguments": json.loads(args.args)})
        text = " ".join(c.get("text", "") for c in result.get("content", []))
        check(f"tools/call {args.tool} answers from the API", not result.get("isError") and args.expect in text, json.dumps(result)[:500])
    except (urllib.error.URLError, RuntimeError, KeyError, ValueError) as e:
        check("MCP exchange", False, repr(e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
