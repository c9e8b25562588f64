"""The web tests' fixtures: the generated clients' npm tools."""

import pytest

from tests.common.clients import TS
from tests.common.npm import npm_ci


@pytest.fixture(scope="module")
def npm_tools():
    """The pinned npm tools of the generated clients' TypeScript project."""
    return npm_ci(TS)
