"""Schemathesis hooks (SCHEMATHESIS_HOOKS=tests.common.schemathesis_hooks, set by tests/web/test_schemathesis.py).

The document gives `creator` the format eip55-address: 0x and 40 hex digits in one case, or in mixed
case passing the EIP-55 checksum, which no pattern can state. Generated creators are such addresses.
"""

import schemathesis
from eth_utils import to_checksum_address
from hypothesis import strategies as st

ADDRESSES = st.binary(min_size=20, max_size=20).flatmap(
    lambda raw: st.sampled_from([to_checksum_address(raw), "0x" + raw.hex(), "0x" + raw.hex().upper()])
)

schemathesis.openapi.format("eip55-address", ADDRESSES)
