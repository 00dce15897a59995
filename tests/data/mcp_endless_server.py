"""A real stdio MCP server (plain JSON-RPC, no SDK) whose costs have no end, for issue 41's proxy tests.

``python mcp_endless_server.py MODE [ARG] [COUNT_FILE]``:

``pages``      answers every ``tools/list`` with 512 tools of ~8 KB and a new ``nextCursor`` (H1: a list
               that never ends).
``changed``    after every ``tools/list`` sends ``notifications/tools/list_changed``, and its list is
               different each time (M5); with COUNT_FILE, writes how many listings it answered there.
``big MB``     ``tools/call`` of ``big`` answers one line of MB megabytes (M6).
``stderr MB``  writes MB megabytes to stderr when it starts, then serves (L8).

Every mode has the tool ``echo`` (returns its ``text`` argument).
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "pages"
ARG = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 0
COUNT_FILE = sys.argv[3] if len(sys.argv) > 3 else None
ECHO = {"name": "echo", "description": "Repeat the given text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
listings = 0


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def page(cursor):
    start = int(cursor or 0)
    tools = [{"name": f"tool_{start + i}",
              "description": " ".join(WORDS[(start + i + j) % 10] for j in range(1400)),
              "inputSchema": {"type": "object"}} for i in range(512)]
    return {"tools": ([ECHO] if not start else []) + tools, "nextCursor": str(start + 512)}


def listing():
    global listings
    listings += 1
    if COUNT_FILE:
        with open(COUNT_FILE, "w") as fh:
            fh.write(str(listings))
    return {"tools": [ECHO, {"name": f"changed_{listings}", "description": f"Version {listings} of the list.",
                             "inputSchema": {"type": "object"}}]}


def main():
    if MODE == "stderr":
        block = "e" * 1023 + "\n"
        for _ in range(ARG * 1024):
            sys.stderr.write(block)
        sys.stderr.flush()
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "id" not in msg:
            continue
        method, rid = msg.get("method"), msg["id"]
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": f"endless-{MODE}", "version": "1"}}})
        elif method == "tools/list":
            if MODE == "pages":
                send({"jsonrpc": "2.0", "id": rid, "result": page((msg.get("params") or {}).get("cursor"))})
            elif MODE == "changed":
                send({"jsonrpc": "2.0", "id": rid, "result": listing()})
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            else:
                tools = [ECHO, {"name": "big", "description": "An answer of many megabytes.",
                                "inputSchema": {"type": "object"}}]
                send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        elif method == "tools/call":
            name = msg.get("params", {}).get("name")
            if name == "big":
                text = "x" * (ARG << 20)
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
            else:
                text = str(msg.get("params", {}).get("arguments", {}).get("text", ""))
                send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
        else:
            send({"jsonrpc": "2.0", "id": rid, "result": {}})


if __name__ == "__main__":
    main()
