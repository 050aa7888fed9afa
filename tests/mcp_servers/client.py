#!/usr/bin/env python3
"""Drives an MCP stdio server with the Python `mcp` SDK client (2.x), for
cross-implementation tests and the benchmark baseline.

  client.py script  SCRIPT.json -- CMD ARGS...
      SCRIPT.json is a list of steps: {"list_tools": true},
      {"call": NAME, "args": {...}}, {"list_resources": true},
      {"read_resource": URI}. Prints one JSON object per step.
  client.py bench N TOOL ARGS_JSON -- CMD ARGS...
      connects, calls TOOL N times, prints {"connect_s": .., "call_s": [..]}.
"""
import asyncio
import json
import sys
import time

from mcp import Client, StdioServerParameters


def dump(obj):
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    return obj


async def run_script(steps, params):
    async with Client(params) as c:
        for step in steps:
            if "list_tools" in step:
                r = await c.list_tools()
            elif "call" in step:
                r = await c.call_tool(step["call"], step.get("args", {}))
            elif "list_resources" in step:
                r = await c.list_resources()
            elif "read_resource" in step:
                r = await c.read_resource(step["read_resource"])
            else:
                raise SystemExit(f"unknown step {step}")
            print(json.dumps(dump(r)), flush=True)


async def run_bench(n, tool, args, params):
    t0 = time.perf_counter()
    async with Client(params) as c:
        await c.list_tools()
        connect = time.perf_counter() - t0
        calls = []
        for _ in range(n):
            t = time.perf_counter()
            await c.call_tool(tool, args)
            calls.append(time.perf_counter() - t)
    print(json.dumps({"connect_s": connect, "call_s": calls}), flush=True)


def main():
    argv = sys.argv[1:]
    sep = argv.index("--")
    head, cmd = argv[:sep], argv[sep + 1 :]
    params = StdioServerParameters(command=cmd[0], args=cmd[1:])
    if head[0] == "script":
        with open(head[1]) as f:
            steps = json.load(f)
        asyncio.run(run_script(steps, params))
    elif head[0] == "bench":
        asyncio.run(run_bench(int(head[1]), head[2], json.loads(head[3]), params))
    else:
        raise SystemExit(f"unknown mode {head[0]}")


if __name__ == "__main__":
    main()
