"""The generated clients' TypeScript project, and a command run to its end."""

import subprocess

from tests.common.live import ROOT

TS = ROOT / "tests" / "clients" / "ts"


def run(args, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert result.returncode == 0, f"{args[0]} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result
