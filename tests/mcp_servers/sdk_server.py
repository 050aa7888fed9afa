#!/usr/bin/env python3
"""An MCP server written with the Python `mcp` SDK (2.x), for the
cross-implementation tests. Usage: sdk_server.py [stdio | sse PORT |
streamable-http PORT]."""
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("wsbench-sdk-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "stdio":
        server.run()
    else:
        server.run(mode, host="127.0.0.1", port=int(sys.argv[2]))
