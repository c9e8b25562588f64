"""Static security check: bandit over the service's code."""

import subprocess

from tests.common.live import BIN, ROOT


def test_bandit_finds_nothing_of_medium_severity_or_above():
    # -ll: report medium and high severity only. A finding is fixed, or marked `# nosec` with the
    # reason written beside it.
    result = subprocess.run(
        [str(BIN / "bandit"), "-q", "-r", "identity", "-ll"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
