#!/usr/bin/env python3
"""A small stdio MCP server (stdlib only) that misbehaves on request.

Used by tests/mcp_*.rs for the cases in docs/public-cases.md.
Flags (any combination):
  --banner         C03: banner and log lines on stdout before and between
                   messages (plain text, emoji, and JSON that is not JSON-RPC)
  --bom            a UTF-8 BOM before the first message written
  --result-first   write replies as {"result":..,"jsonrpc":..,"id":..}
                   (JavaScript key order) instead of jsonrpc, id, result
  --flood-stderr N write N bytes of log lines to stderr before answering
  --no-init        read everything, never answer (initialize hangs)
  --list-change    C05: tools [alpha, beta]; calling alpha switches to
                   [alpha, gamma] and sends tools/list_changed first
  --log FILE       append every method received to FILE (one per line)
  --print-big N    print the byte length and sha-256 of big(N)'s text, exit
Tools: echo(text) (or echo(env=NAME): that variable's value), big(n) (n bytes of text, 'é' every 1000 bytes and last),
sleep(secs), die(code) (exits mid-call after a line on stderr), and the
list-change tools.
"""
import json
import os
import sys
import threading
import time

args = sys.argv[1:]
flag = lambda f: f in args
def opt(f, default=None):
    return args[args.index(f) + 1] if f in args else default

BANNER = flag("--banner")
RESULT_FIRST = flag("--result-first")
bom_pending = flag("--bom")
LOG = opt("--log")
out = sys.stdout.buffer

def log_method(m):
    if LOG:
        with open(LOG, "a") as f:
            f.write(m + "\n")

write_lock = threading.Lock()

def write_raw(b):
    with write_lock:
        out.write(b)
        out.flush()

def send(m):
    global bom_pending
    if RESULT_FIRST and "result" in m:
        m = {"result": m["result"], "jsonrpc": m["jsonrpc"], "id": m["id"]}
    data = json.dumps(m, ensure_ascii=False).encode("utf-8") + b"\n"
    if bom_pending:
        data = b"\xef\xbb\xbf" + data
        bom_pending = False
    write_raw(data)

def reply(i, result):
    send({"jsonrpc": "2.0", "id": i, "result": result})

def text(t):
    return {"content": [{"type": "text", "text": t}]}

def schema(**props):
    return {"type": "object", "properties": {k: {"type": v} for k, v in props.items()}}

BASE_TOOLS = [
    {"name": "echo", "description": "Echo text", "inputSchema": schema(text="string"),
     "annotations": {"readOnlyHint": True}},
    {"name": "big", "description": "n bytes of text", "inputSchema": schema(n="integer")},
    {"name": "sleep", "description": "Sleep secs", "inputSchema": schema(secs="number")},
    {"name": "die", "description": "Exit mid-call", "inputSchema": schema(code="integer")},
]
if flag("--list-change"):
    tools = [{"name": n, "inputSchema": schema()} for n in ("alpha", "beta")]
else:
    tools = list(BASE_TOOLS)

def big_text(n):
    # ASCII with 'é' (2 bytes) every 1000 bytes and as the very last char.
    chunk = ("x" * 998 + "é").encode("utf-8")  # 1000 bytes
    body = (chunk * (n // 1000 + 1))[: max(n - 2, 0)]
    while True:
        try:
            s = body.decode("utf-8")
            break
        except UnicodeDecodeError:
            body = body[:-1]
    s = s + "é"
    s = s + "y" * (n - len(s.encode("utf-8")))
    return s

if opt("--print-big"):
    import hashlib
    t = big_text(int(opt("--print-big"))).encode("utf-8")
    print(len(t), hashlib.sha256(t).hexdigest())
    sys.exit(0)

if BANNER:
    for line in ["Starting server v0.2.6", "🖥️ Server mode: STDIO", "[INFO] ready",
                 '{"level":"info","msg":"boot"}']:
        write_raw((line + "\n").encode("utf-8"))

flood = int(opt("--flood-stderr", "0"))
if flood:
    line = ("stderr flood " + "z" * 100 + "\n").encode()
    err = sys.stderr.buffer
    written = 0
    while written < flood:
        err.write(line)
        written += len(line)
    err.write(b"flood done\n")
    err.flush()

for raw in sys.stdin.buffer:
    try:
        msg = json.loads(raw)
    except ValueError:
        continue
    method = msg.get("method")
    if method:
        log_method(method)
    if flag("--no-init"):
        continue
    if "id" not in msg or method is None:
        continue
    i = msg["id"]
    if method == "initialize":
        reply(i, {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "fake", "version": "0"}})
    elif method == "tools/list":
        reply(i, {"tools": tools})
    elif method == "ping":
        reply(i, {})
    elif method == "tools/call":
        name = msg["params"]["name"]
        a = msg["params"].get("arguments") or {}
        if BANNER:
            write_raw(b"Processing request of type CallToolRequest\n")
        names = [t["name"] for t in tools]
        if name not in names:
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32602, "message": f"Unknown tool: {name}"}})
        elif name == "echo" and "env" in a:
            reply(i, text(os.environ.get(a["env"], "<unset>")))
        elif name == "echo":
            reply(i, text(a.get("text", "")))
        elif name == "big":
            reply(i, text(big_text(int(a.get("n", 0)))))
        elif name == "sleep":
            # In a thread, so notifications (cancel) are still read.
            def later(i=i, secs=float(a.get("secs", 1))):
                time.sleep(secs)
                reply(i, text("slept"))
            threading.Thread(target=later, daemon=True).start()
        elif name == "die":
            sys.stderr.write("fatal: dying in the middle of a call\n")
            sys.stderr.flush()
            os._exit(int(a.get("code", 7)))
        elif name == "alpha":
            if [t["name"] for t in tools] == ["alpha", "beta"]:
                tools = [{"name": n, "inputSchema": schema()} for n in ("alpha", "gamma")]
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            reply(i, text("alpha"))
        else:
            reply(i, text(name))
    else:
        send({"jsonrpc": "2.0", "id": i, "error": {"code": -32601, "message": "Method not found"}})
