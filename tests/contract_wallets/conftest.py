"""Two anvil nodes for the session: HOME, where the contract wallets are deployed, and OTHER, a chain where none
is (a signature for HOME's wallets sent with OTHER's chain id is not theirs there)."""

from types import SimpleNamespace

import pytest
from eth_utils import to_checksum_address

from tests import wallets
from tests.common.chain import HOME_CHAIN, OTHER_CHAIN, OWNER_KEYS, Anvil


@pytest.fixture(scope="session")
def chains():
    """HOME and OTHER (Anvil nodes) and the wallets deployed on HOME (`wallets`: chain.mjs's deploy answer, in
    EIP-55 form)."""
    wallets.install()
    home = Anvil(HOME_CHAIN)
    try:
        other = Anvil(OTHER_CHAIN)
    except BaseException:
        home.stop()
        raise
    try:
        deployed = home.viem([{"op": "deploy", "owners": [wallets.address_of(key) for key in OWNER_KEYS]}])[0]
        deployed = {name: to_checksum_address(value) if name in ADDRESSES else value for name, value in deployed.items()}
        yield SimpleNamespace(home=home, other=other, wallets=SimpleNamespace(**deployed),
                              urls={HOME_CHAIN: home.url, OTHER_CHAIN: other.url})
    finally:
        home.stop()
        other.stop()


ADDRESSES = {"safe1of1", "safe2of3", "wallet", "wrongAnswer", "factory", "counterfactual"}
