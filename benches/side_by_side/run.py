#!/usr/bin/env python3
"""Side-by-side benchmark of issue 18: wsbench, the reference (agentscope
2.0.11) and the physical floor of each path, interleaved in one run.

Usage (from the repository root): python3 benches/side_by_side/run.py
    [--rounds 2] [--iters 30] [--venv ~/.cache/wsbench-sbs/venv]

Installs the reference into the venv on first use (pip install
agentscope==2.0.11), builds wsbench's side (`cargo build --release --bench
side_by_side`) and the release binary, then runs every row's floor,
reference and wsbench case one after the other, round after round, and
prints the table with each column's medians (a range over the rounds) and
the load average. See README.md beside this file. Not run by CI.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REFERENCE = "agentscope==2.0.11"

# (row, floor case, reference case or None, wsbench case)
ROWS = [
    ("Write 1 MiB, new file", "floor_write_1mib", "write_new_1mib", "write_new_1mib"),
    ("Edit one line of a 1 MiB file", "floor_edit_1mib", "edit_1mib", "edit_1mib"),
    ("offload_tool_result 1 MiB", "floor_write_1mib", "offload_1mib", "offload_1mib"),
    ("Read 1 MiB (2,000 lines)", "floor_read_1mib", "read_1mib", "read_1mib"),
    ("Bash `true`, local, in-process", "floor_spawn_sh", "bash_local", "bash_local"),
    ("bubblewrap Bash `true`, network shared (the reference's setting)", "floor_bwrap", "bash_bwrap", "bash_bwrap_share_net"),
    ("bubblewrap Bash `true`, wsbench default (no network)", "floor_bwrap", None, "bash_bwrap"),
    ("`wsbench --version`, whole process", "proc_true", None, "proc_version"),
    ("`wsbench exec -- true`, whole process", "proc_true", None, "proc_exec_true"),
]
FLOOR_NAMES = {
    "floor_write_1mib": "write(2) of 1 MiB",
    "floor_edit_1mib": "read + replace + write",
    "floor_read_1mib": "read(2) of 1 MiB",
    "floor_spawn_sh": "posix_spawn `sh -c true`",
    "floor_bwrap": "bare bwrap, reference args",
    "proc_true": "`/bin/true`",
}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def ensure_venv(venv):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        print(f"creating {venv} ...", file=sys.stderr)
        sh([sys.executable, "-m", "venv", venv])
    probe = subprocess.run([py, "-c", "import agentscope, sys; sys.stdout.write(agentscope.__version__)"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.strip() != REFERENCE.split("==")[1]:
        print(f"installing {REFERENCE} ...", file=sys.stderr)
        sh([py, "-m", "pip", "install", "-q", REFERENCE])
    return py


def build():
    sh(["cargo", "build", "--release", "--bin", "wsbench"], cwd=ROOT)
    out = subprocess.run(["cargo", "build", "--release", "--bench", "side_by_side", "--message-format=json"],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    exe = None
    for line in out.splitlines():
        m = json.loads(line)
        if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "side_by_side" and m.get("executable"):
            exe = m["executable"]
    if not exe:
        sys.exit("could not find the side_by_side bench executable")
    return exe, os.path.join(ROOT, "target", "release", "wsbench")


def proc_case(case, iters, scratch, wsbench):
    """Whole-process rows, timed here with posix_spawn + waitpid."""
    argv = {
        "proc_true": ["/bin/true"],
        "proc_version": [wsbench, "--version"],
        "proc_exec_true": [wsbench, "exec", "--workdir", scratch, "--", "true"],
    }[case]
    env = dict(os.environ, HOME=scratch, XDG_DATA_HOME=os.path.join(scratch, "data"),
               XDG_CONFIG_HOME=os.path.join(scratch, "config"))
    devnull = os.open(os.devnull, os.O_WRONLY)
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, env, file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1)])
        _, status = os.waitpid(pid, 0)
        samples.append(time.perf_counter() - t)
        if status != 0:
            sys.exit(f"{argv} failed with {status}")
    os.close(devnull)
    return statistics.median(samples) * 1000


def case(kind, name, iters, scratch, exe, py, wsbench):
    if name.startswith("proc_"):
        return proc_case(name, iters, scratch, wsbench)
    d = tempfile.mkdtemp(dir=scratch)
    argv = [py, os.path.join(HERE, "reference.py")] if kind == "ref" else [exe]
    out = subprocess.run(argv + [name, str(iters), d], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


def fmt(v):
    if not v:
        return "—"
    lo, hi = min(v), max(v)
    f = lambda x: f"{x:.2f}" if x < 10 else f"{x:.1f}"
    return f"{f(lo)} ms" if f(lo) == f(hi) else f"{f(lo)}–{f(hi)} ms"


def ratio(a, b):
    if not a or not b:
        return "—"
    r = [x / y for x, y in zip(a, b)]
    lo, hi = min(r), max(r)
    return f"{lo:.2f}×" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}×"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--venv", default=os.path.expanduser("~/.cache/wsbench-sbs/venv"))
    ap.add_argument("--only", help="comma-separated row numbers (1-based)")
    ap.add_argument("--no-build", action="store_true",
                    help="use target/release/wsbench and the newest side_by_side bench as built")
    a = ap.parse_args()
    py = ensure_venv(a.venv)
    if a.no_build:
        import glob
        exes = [p for p in glob.glob(os.path.join(ROOT, "target/release/deps/side_by_side-*"))
                if os.access(p, os.X_OK) and not p.endswith(".d")]
        if not exes:
            sys.exit("no side_by_side bench built; run without --no-build")
        exe, wsbench = max(exes, key=os.path.getmtime), os.path.join(ROOT, "target/release/wsbench")
    else:
        exe, wsbench = build()
    rows = ROWS
    if a.only:
        keep = {int(x) for x in a.only.split(",")}
        rows = [r for i, r in enumerate(ROWS, 1) if i in keep]
    load0 = os.getloadavg()
    res = {r[0]: {"floor": [], "ref": [], "ws": []} for r in rows}
    with tempfile.TemporaryDirectory(prefix="wsbench-sbs-") as scratch:
        for rnd in range(a.rounds):
            for row, floor, ref, ws in rows:
                n = a.iters if "bwrap" not in ws else max(5, a.iters // 2)
                res[row]["floor"].append(case("ws", floor, n, scratch, exe, py, wsbench))
                if ref:
                    res[row]["ref"].append(case("ref", ref, n, scratch, exe, py, wsbench))
                res[row]["ws"].append(case("ws", ws, n, scratch, exe, py, wsbench))
                print(f"round {rnd + 1}: {row} done", file=sys.stderr)
    load1 = os.getloadavg()
    print(f"\n{a.rounds} interleaved rounds, medians of {a.iters} calls each (bubblewrap rows: "
          f"{max(5, a.iters // 2)}); {os.cpu_count()} CPUs; load average "
          f"{load0[0]:.2f} at the start, {load1[0]:.2f} at the end.\n")
    print("| path | floor | floor (same run) | reference | wsbench | wsbench / floor | wsbench / reference |")
    print("|---|---|---|---|---|---|---|")
    for row, floor, ref, ws in rows:
        r = res[row]
        print(f"| {row} | {FLOOR_NAMES[floor]} | {fmt(r['floor'])} | {fmt(r['ref'])} | {fmt(r['ws'])} "
              f"| {ratio(r['ws'], r['floor'])} | {ratio(r['ws'], r['ref'])} |")


if __name__ == "__main__":
    main()
