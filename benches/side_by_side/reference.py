"""The reference's side of the side-by-side benchmark: agentscope 2.0.11's
tools and workspace, one case per run, timed in-process, its median printed
as one JSON line (the same shape as `side_by_side`, wsbench's side).

Usage: python reference.py <case> <iterations> <scratch dir>
Run by run.py with the venv's interpreter; see README.md beside it.
"""

import asyncio
import json
import os
import statistics
import sys
import time

from agentscope.message import ToolResultBlock
from agentscope.tool._builtin._backend import LocalBackend
from agentscope.tool._builtin._bash import Bash
from agentscope.tool._builtin._edit import Edit
from agentscope.tool._builtin._read import Read
from agentscope.tool._builtin._write import Write
from agentscope.workspace import LocalWorkspace


def big_text() -> str:
    """1 MiB in 2,000 lines: the same text as wsbench's side."""
    line = "x" * ((1 << 20) // 2000 - 8)
    return "".join(f"{i:06} {line}\n" for i in range(2000))


async def timed(iters, one, prep=None):
    out = []
    for i in range(iters):
        if prep:
            prep(i)
        t = time.perf_counter()
        await one(i)
        out.append(time.perf_counter() - t)
    return out


def rm(p):
    try:
        os.remove(p)
    except FileNotFoundError:
        pass


async def drain(gen):
    """Bash.call is an async generator of chunks."""
    last = None
    async for chunk in gen:
        last = chunk
    return last


async def run(case, iters, d):
    text = big_text()
    local = LocalBackend()
    f = lambda i: os.path.join(d, f"f{i % 2}.txt")
    if case == "write_new_1mib":
        w = Write(backend=local)
        return await timed(iters, lambda i: w.call(file_path=f(i), content=text), lambda i: rm(f(i)))
    if case == "edit_1mib":
        p = os.path.join(d, "edit.txt")
        with open(p, "w") as fh:
            fh.write(text)
        e = Edit(backend=local)
        swap = lambda i: ("001000 x", "001000 y") if i % 2 == 0 else ("001000 y", "001000 x")
        return await timed(
            iters, lambda i: e.call(file_path=p, old_string=swap(i)[0], new_string=swap(i)[1])
        )
    if case == "read_1mib":
        p = os.path.join(d, "read.txt")
        with open(p, "w") as fh:
            fh.write(text)
        r = Read(backend=local)
        return await timed(iters, lambda i: r.call(file_path=p))
    if case == "offload_1mib":
        ws = LocalWorkspace(workdir=d)
        block = ToolResultBlock(id="big", name="Bash", output=text)
        sess = os.path.join(d, "sessions", "sbs")

        def prep(_):
            for n in os.listdir(sess) if os.path.isdir(sess) else []:
                if n.startswith("tool_result-"):
                    rm(os.path.join(sess, n))

        return await timed(
            iters, lambda i: ws.offload_tool_result(session_id="sbs", tool_result=block), prep
        )
    if case == "bash_local":
        b = Bash(cwd=d, backend=local)
        return await timed(iters, lambda i: drain(b.call(command="true")))
    if case == "bash_bwrap":
        from agentscope.workspace._bubblewrap._bubblewrap_backend import BubblewrapBackend

        be = BubblewrapBackend(
            host_workdir=os.path.join(d, "w"), host_tmpdir=os.path.join(d, "t")
        )
        b = Bash(cwd="/workspace", backend=be)
        return await timed(iters, lambda i: drain(b.call(command="true")))
    raise SystemExit(f"unknown case {case}")


def main():
    case, iters, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(d, exist_ok=True)
    d = os.path.realpath(d)
    samples = sorted(asyncio.run(run(case, iters, d)))
    print(
        json.dumps(
            {
                "case": case,
                "n": len(samples),
                "median_ms": statistics.median(samples) * 1000,
                "min_ms": samples[0] * 1000,
            }
        )
    )


if __name__ == "__main__":
    main()
