"""What a request does in Python, counted rather than sampled: bytecodes, calls, and reads through
Flask's context proxies.

A sampling profile moves with the machine; this count does not (two runs give the same calls, and
bytecodes within a few, for work done once a second such as the rate-limit counts' sweep). Each
app answers the requests of bench/instructions.py (the same seeded database and warm-up; a GET finds
its body made) under `sys.settrace` with opcode events. For plain Flask doing the floor's work and
for the service, it prints the bytecodes and the Python calls per request, and the reads through
Werkzeug's LocalProxy (`flask.request`, `flask.g`, `flask.current_app`): five calls each, some 9,000
instructions, where the attribute itself costs a few dozen (docs/performance.md). Then, for the
service, the functions that make those reads and those that hold the most bytecodes. A C function
(SQLite's, orjson's) counts as the one bytecode that calls it: instructions are bench/instructions.py's.

    .venv/bin/python bench/calls.py [get|post] [REQUESTS]   # GET and 100 requests by default; seconds
"""

import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TOP = 25
# Where a read through a LocalProxy goes, whatever attribute is read (LocalProxy's __getattr__,
# __setattr__ and the rest all go through it).
PROXY_READ = ("local.py", "_ProxyLookup.__get__")
HARNESS = str(ROOT / "bench")  # the loop that makes the requests, left out of the table


def where(code):
    """A code object as `package/module.py:function`, short enough for a table."""
    path = Path(code.co_filename)
    parts = path.parts[path.parts.index("site-packages") + 1:] if "site-packages" in path.parts else path.parts[-2:]
    return f"{'/'.join(parts)}:{code.co_qualname}"


def count(answer):
    """Run `answer()` under the tracer; returns (bytecodes, calls per code, inclusive bytecodes per
    code, proxy reads per calling function)."""
    bytecodes = 0
    calls, inclusive, readers = Counter(), Counter(), Counter()
    stack = []

    def on_event(frame, event, _arg):
        nonlocal bytecodes
        if event == "opcode":
            bytecodes += 1
        elif event == "return":
            code, start = stack.pop()
            if all(outer is not code for outer, _start in stack):  # a recursive call counts once
                inclusive[code] += bytecodes - start
        return on_event

    def on_call(frame, event, _arg):
        if event != "call":
            return None
        code = frame.f_code
        frame.f_trace_opcodes = True
        stack.append((code, bytecodes))
        calls[code] += 1
        if code.co_filename.endswith(PROXY_READ[0]) and code.co_qualname == PROXY_READ[1]:
            caller = frame.f_back
            while caller is not None and caller.f_code.co_filename.endswith(PROXY_READ[0]):
                caller = caller.f_back
            readers[where(caller.f_code) if caller is not None else "?"] += 1
        return on_event

    sys.settrace(on_call)
    try:
        answer()
    finally:
        sys.settrace(None)
    return bytecodes, calls, inclusive, readers


def child(seed_folder, target, operation, requests):
    """Count `requests` requests of `target`; print the figures per request as one JSON line."""
    from bench.instructions import measured_app, warmed

    with measured_app(seed_folder, target, "-") as (app, seeded):
        answer = warmed(app, seeded, operation)
        bytecodes, calls, inclusive, readers = count(lambda: answer(requests))
    print(json.dumps({
        "bytecodes": bytecodes / requests,
        "calls": sum(calls.values()) / requests,
        "proxy_reads": sum(readers.values()) / requests,
        "readers": [(name, n / requests) for name, n in readers.most_common()],
        "top": [(where(code), n / requests, calls[code] / requests)
                for code, n in inclusive.most_common() if not code.co_filename.startswith(HARNESS)][:TOP],
    }))


def main(operation="get", requests=100):
    from bench.instructions import COUNTS, seed

    if operation not in ("get", "post") or not 0 < requests <= COUNTS[operation][1]:
        sys.exit(f"usage: bench/calls.py [get|post] [1 to {COUNTS['post'][1]} requests]")
    figures = {}
    with tempfile.TemporaryDirectory(prefix="identity-calls-") as folder:
        seed(folder)
        for target in ("plain", "project"):
            result = subprocess.run(
                [sys.executable, __file__, "--child", folder, target, operation, str(requests)],
                capture_output=True, text=True, cwd=ROOT, check=False,
                env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": folder},
            )
            if result.returncode != 0:
                sys.exit(f"{target} failed:\n{result.stderr[-2000:]}")
            figures[target] = json.loads(result.stdout.splitlines()[-1])
    report(operation, requests, figures)


def report(operation, requests, figures):
    plain, project = figures["plain"], figures["project"]
    print(f"{operation.upper()}, per request ({requests} requests, counted under sys.settrace):")
    print(f"  {'':28} {'plain Flask':>12} {'the service':>12}")
    for name, what in (("bytecodes", "Python bytecodes"), ("calls", "Python calls"),
                       ("proxy_reads", "reads through a LocalProxy")):
        print(f"  {what:<28} {plain[name]:12,.1f} {project[name]:12,.1f}")
    print("The service's reads through a LocalProxy, by the function that makes them:")
    for name, n in project["readers"]:
        print(f"  {n:5.1f}  {name}")
    print(f"The service's {TOP} functions with the most bytecodes (their callees' included), and calls of each:")
    for name, n, calls in project["top"]:
        print(f"  {n:9,.0f} {calls:6.1f}  {name}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main(*sys.argv[1:2], *(int(value) for value in sys.argv[2:3]))
