"""A real stdio MCP server (plain JSON-RPC, no SDK) that lists hostile or clumsy tools, for the proxy's tests.

``python mcp_hostile_server.py MODE [N]``:

``many N``       lists N tools, each with a ~5 KB description (the 1,000-tool, ~5 MB list).
``malformed``    lists a good tool, one with ``description: null`` and a schema nested 500 deep, one
                 without a name, one whose name is a number, and one with a 1 MB description.
``slow N``       waits N seconds before it answers ``initialize`` (a server that starts slowly).
``stuck``        answers one request at a time; ``tools/call`` of ``hang`` never returns, so every
                 later request waits behind it (only a restart helps).
``deep``         answers ``tools/call`` with a result nested 100,000 deep (unparsable).
``endless``      answers every ``tools/list`` with 512 tools of ~8 KB and a new ``nextCursor`` (a list
                 that never ends); with ``N`` = 1, every page is empty instead.
``big N``        answers ``tools/call`` of ``big`` with a text of N MB on one line.
``noline N``     answers ``tools/call`` of ``big`` with N MB and no newline, then waits.
``noisy N``      writes N MB to its stderr before it answers ``initialize``.
``chatty N``     sends ``notifications/tools/list_changed`` after every ``tools/list`` answer (N = 1:
                 its list changes each time, N = 2: 20,000 notifications at once after the first);
                 its tool ``listings`` returns how many ``tools/list`` requests it answered.

Every mode also has the tool ``echo`` (returns its ``text`` argument).
"""

import json
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "many"
N = int(sys.argv[2]) if len(sys.argv) > 2 else 0

ECHO = {
    "name": "echo",
    "description": "Repeat the given text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def deep(n):
    node = {"type": "string"}
    for _ in range(n):
        node = {"type": "object", "properties": {"x": node}}
    return node


LISTED = [0]


def tools():
    if MODE == "endless":
        if N == 1:
            return []
        page = LISTED[0]
        return [{"name": f"t{page}_{i}", "description": f"page {page} tool {i} " + "x" * 8000,
                 "inputSchema": {"type": "object"}} for i in range(512)]
    if MODE == "chatty":
        extra = [{"name": f"v{LISTED[0]}", "description": "changes", "inputSchema": {"type": "object"}}]
        count = {"name": "listings", "description": "How many tools/list requests were answered.",
                 "inputSchema": {"type": "object"}}
        return [ECHO, count, *(extra if N == 1 else [])]
    if MODE == "many":
        words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
        return [ECHO] + [
            {
                "name": f"tool_{i}",
                "description": " ".join(words[(i + j) % 10] for j in range(800)),
                "inputSchema": {"type": "object"},
            }
            for i in range(N)
        ]
    if MODE == "malformed":
        return [
            ECHO,
            {"name": "nulldesc_deep", "description": None, "inputSchema": deep(250)},  # 500 levels,
            {"description": "no name", "inputSchema": {"type": "object"}},
            {"name": 42, "inputSchema": {"type": "object"}},
            {"name": "huge", "description": "weather forecast " * 60_000, "inputSchema": {"type": "object"}},
            {
                "name": "weather",
                "description": "Get the weather forecast for a city.",
                "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
        ]
    return [ECHO, {"name": "hang", "description": "Never returns.", "inputSchema": {"type": "object"}},
            {"name": "big", "description": "A big answer.", "inputSchema": {"type": "object"}}]


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def notify():
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}) + "\n")


if MODE == "noisy":
    block = "e" * 1023 + "\n"
    for _ in range(N * 1024):
        sys.stderr.write(block)
    sys.stderr.flush()

for line in sys.stdin:
    msg = json.loads(line)
    method, mid = msg.get("method"), msg.get("id")
    if mid is None:
        continue  # notifications
    if method == "initialize":
        if MODE == "slow":
            time.sleep(N)
        send(
            {
                "jsonrpc": "2.0",
                "id": mid,
                "result": {
                    "protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": f"hostile-{MODE}", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        result = {"tools": tools()}
        if MODE == "endless":
            result["nextCursor"] = f"page-{LISTED[0] + 1}"
        LISTED[0] += 1
        send({"jsonrpc": "2.0", "id": mid, "result": result})
        if MODE == "chatty":
            for _ in range(20_000 if N == 2 and LISTED[0] == 1 else 1):
                notify()
            sys.stdout.flush()
    elif method == "tools/call":
        name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
        if MODE == "deep" and name != "echo":
            nested = '{"a": ' * 100_000 + "1" + "}" * 100_000
            sys.stdout.write(f'{{"jsonrpc": "2.0", "id": {json.dumps(mid)}, "result": {nested}}}\n')
            sys.stdout.flush()
            continue
        if name == "hang":
            time.sleep(3600)
        if name == "listings":
            args = {"text": LISTED[0]}
        if name == "big" and MODE in ("big", "noline"):
            head = (f'{{"jsonrpc": "2.0", "id": {json.dumps(mid)}, '
                    '"result": {"content": [{"type": "text", "text": "')
            sys.stdout.write(head)
            for _ in range(N):
                sys.stdout.write("y" * (1 << 20))
            sys.stdout.write('"}]}}\n' if MODE == "big" else "")
            sys.stdout.flush()
            if MODE == "noline":
                time.sleep(3600)
            continue
        send(
            {
                "jsonrpc": "2.0",
                "id": mid,
                "result": {"content": [{"type": "text", "text": str(args.get("text"))}]},
            }
        )
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": f"no method {method}"}})
