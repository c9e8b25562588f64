"""Fixtures of the domain's tests: they need no app and no database."""

import pytest

from tests import wallets


@pytest.fixture(scope="session")
def ethers():
    """ethers(requests) -> answers: an independent wallet, ethers run by node (tests/wallets/sign.mjs)."""
    wallets.install()
    return wallets.ethers
