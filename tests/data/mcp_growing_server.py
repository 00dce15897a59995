"""A real MCP server (official SDK) whose tool list grows: ``add_tool`` adds one and says so.

``crash`` makes the process exit during the call (for the proxy's restart path).

Used by tests/tools/test_tools_proxy.py to check that the proxy re-indexes on
``notifications/tools/list_changed``. Run: ``python mcp_growing_server.py`` (stdio) or
``python mcp_growing_server.py --http PORT`` (streamable HTTP on 127.0.0.1:PORT/mcp).
"""

import os

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


@server.tool()
async def add_tool(name: str, description: str, ctx: Context) -> str:
    """Add a new tool to this server.

    Args:
        name: The new tool's name.
        description: What the new tool does.
    """
    def new_tool(text: str) -> str:
        return f"{name}: {text}"

    server.add_tool(new_tool, name=name, description=description)
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of this call."""
    os._exit(3)


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--http":  # streamable HTTP on loopback, path /mcp
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
