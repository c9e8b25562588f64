"""IDENTITY_ETH_RPC_URLS and IDENTITY_ETH_RPC_TIMEOUT_SECONDS: read at start-up, refused with a message naming them."""

import pytest

from identity.config import settings_from_env


def test_endpoints_by_chain_and_the_timeout_are_read():
    config = settings_from_env({"IDENTITY_ETH_RPC_URLS": " 1=https://rpc.example/v1/abc , 8453=http://10.0.0.7:8545",
                                "IDENTITY_ETH_RPC_TIMEOUT_SECONDS": "2.5"})
    assert config["IDENTITY_ETH_RPC_URLS"] == {1: "https://rpc.example/v1/abc", 8453: "http://10.0.0.7:8545"}
    assert config["IDENTITY_ETH_RPC_TIMEOUT_SECONDS"] == 2.5


def test_without_them_no_chain_has_an_endpoint_and_a_call_waits_5_seconds_at_most():
    config = settings_from_env({})
    assert config["IDENTITY_ETH_RPC_URLS"] == {}
    assert config["IDENTITY_ETH_RPC_TIMEOUT_SECONDS"] == 5


@pytest.mark.parametrize("raw", ["1:https://rpc.example", "one=https://rpc.example", "1=ftp://rpc.example",
                                 "1=https://", "1=rpc.example", "1=https://a.example,1=https://b.example", "-1=http://x"])
def test_a_malformed_endpoint_list_is_refused_naming_the_setting(raw):
    with pytest.raises(ValueError, match="IDENTITY_ETH_RPC_URLS"):
        settings_from_env({"IDENTITY_ETH_RPC_URLS": raw})


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "301", "inf"])
def test_a_timeout_that_is_not_a_bounded_number_of_seconds_is_refused_naming_the_setting(raw):
    with pytest.raises(ValueError, match="IDENTITY_ETH_RPC_TIMEOUT_SECONDS"):
        settings_from_env({"IDENTITY_ETH_RPC_TIMEOUT_SECONDS": raw})
