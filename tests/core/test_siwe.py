"""Sign-In with Ethereum messages (identity/core/siwe.py): the EIP's grammar line by line, messages written
from their fields, the time checks, nonces, and personal_sign signatures made by an independent wallet
(ethers)."""

import dataclasses
import string
from datetime import UTC, datetime, timedelta, timezone

import pytest
from eth_account import Account
from eth_account.messages import encode_defunct
from eth_utils import is_checksum_address, keccak, to_checksum_address
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from identity.core import siwe
from identity.core.signatures import SECP256K1_N, SignatureError

# The three examples of EIP-4361's "Examples" section, copied verbatim (ethereum/ERCs, ERCS/erc-4361.md).
EIP_IMPLICIT_SCHEME = """example.com wants you to sign in with your Ethereum account:
0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2

I accept the ExampleOrg Terms of Service: https://example.com/tos

URI: https://example.com/login
Version: 1
Chain ID: 1
Nonce: 32891756
Issued At: 2021-09-30T16:25:24Z
Resources:
- ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq/
- https://example.com/my-web2-claim.json"""

EIP_IMPLICIT_SCHEME_EXPLICIT_PORT = """example.com:3388 wants you to sign in with your Ethereum account:
0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2

I accept the ExampleOrg Terms of Service: https://example.com/tos

URI: https://example.com/login
Version: 1
Chain ID: 1
Nonce: 32891756
Issued At: 2021-09-30T16:25:24Z
Resources:
- ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq/
- https://example.com/my-web2-claim.json"""

EIP_EXPLICIT_SCHEME = """https://example.com wants you to sign in with your Ethereum account:
0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2

I accept the ExampleOrg Terms of Service: https://example.com/tos

URI: https://example.com/login
Version: 1
Chain ID: 1
Nonce: 32891756
Issued At: 2021-09-30T16:25:24Z
Resources:
- ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq/
- https://example.com/my-web2-claim.json"""

ADDRESS = "0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2"
# Every field, each on the line its number in the comments of the tests below refers to.
FULL = [
    "identity.example.com wants you to sign in with your Ethereum account:",  # 1
    ADDRESS,  # 2
    "",  # 3
    "Sign in to the Identity service.",  # 4
    "",  # 5
    "URI: https://identity.example.com/auth/siwe",  # 6
    "Version: 1",  # 7
    "Chain ID: 1",  # 8
    "Nonce: Kq3m8ZtP0aR7wXy2bC5d",  # 9
    "Issued At: 2026-05-01T12:00:00Z",  # 10
    "Expiration Time: 2026-05-01T12:10:00Z",  # 11
    "Not Before: 2026-05-01T11:59:00Z",  # 12
    "Request ID: request-42",  # 13
    "Resources:",  # 14
    "- https://identity.example.com/terms",  # 15
]
ISSUED = datetime(2026, 5, 1, 12, tzinfo=UTC)

# Two wallets whose keys are fixed, so that a failure can be replayed.
KEY = "0x" + keccak(b"tests/core wallet one").hex()
OTHER_KEY = "0x" + keccak(b"tests/core wallet two").hex()
WALLET = Account.from_key(KEY).address


def text(lines):
    return "\n".join(lines)


def edited(number, *replacement):
    """FULL with line `number` replaced by the given lines (none: the line removed)."""
    return text(FULL[: number - 1] + list(replacement) + FULL[number:])


def for_wallet(lines, address=WALLET):
    return text([lines[0], address] + lines[2:])


def refused(message):
    with pytest.raises(siwe.MessageError) as caught:
        siwe.parse(message)
    return caught.value


# The EIP's own examples, and what a wallet may write within the grammar.

@pytest.mark.parametrize("message, scheme, domain", [
    (EIP_IMPLICIT_SCHEME, None, "example.com"),
    (EIP_IMPLICIT_SCHEME_EXPLICIT_PORT, None, "example.com:3388"),
    (EIP_EXPLICIT_SCHEME, "https", "example.com"),
])
def test_the_eips_examples_parse(message, scheme, domain):
    parsed = siwe.parse(message)
    assert (parsed.scheme, parsed.domain) == (scheme, domain)
    assert parsed.address == ADDRESS
    assert parsed.statement == "I accept the ExampleOrg Terms of Service: https://example.com/tos"
    assert parsed.uri == "https://example.com/login"
    assert (parsed.version, parsed.chain_id, parsed.nonce) == ("1", 1, "32891756")
    assert parsed.issued_at == datetime(2021, 9, 30, 16, 25, 24, tzinfo=UTC)
    assert (parsed.expiration_time, parsed.not_before, parsed.request_id) == (None, None, None)
    assert parsed.resources == ("ipfs://bafybeiemxf5abjwjbikoz4mc3a3dla6ual3jsgpdr4cjr3oz3evfyavhwq/",
                                "https://example.com/my-web2-claim.json")


def test_every_optional_field_is_read():
    parsed = siwe.parse(text(FULL))
    assert parsed == siwe.SiweMessage(
        domain="identity.example.com", address=ADDRESS, statement="Sign in to the Identity service.",
        uri="https://identity.example.com/auth/siwe", version="1", chain_id=1, nonce="Kq3m8ZtP0aR7wXy2bC5d",
        issued_at=ISSUED, expiration_time=ISSUED + timedelta(minutes=10), not_before=ISSUED - timedelta(minutes=1),
        request_id="request-42", resources=("https://identity.example.com/terms",),
    )


def test_a_message_without_a_statement_has_two_empty_lines_after_the_address():
    assert siwe.parse(edited(4)).statement is None


def test_an_empty_statement_has_an_empty_line_before_and_after_it():
    # What siwe's own JavaScript library writes for statement "": the grammar's `statement` may be empty.
    assert siwe.parse(edited(4, "")).statement == ""


def test_the_message_may_end_after_issued_at():
    parsed = siwe.parse(text(FULL[:10]))
    assert (parsed.expiration_time, parsed.not_before, parsed.request_id, parsed.resources) == (None,) * 4


def test_an_empty_resources_list_and_an_empty_request_id_are_grammatical():
    parsed = siwe.parse(text(FULL[:12] + ["Request ID: ", "Resources:"]))
    assert (parsed.request_id, parsed.resources) == ("", ())


@pytest.mark.parametrize("header, scheme, domain", [
    ("http://localhost:8000", "http", "localhost:8000"),
    ("user:secret@example.com", None, "user:secret@example.com"),
    ("[2001:db8::1]:8443", None, "[2001:db8::1]:8443"),
    ("192.0.2.7", None, "192.0.2.7"),
    ("web+siwe://xn--bcher-kva.example", "web+siwe", "xn--bcher-kva.example"),
])
def test_the_domain_is_any_rfc_3986_authority(header, scheme, domain):
    parsed = siwe.parse(edited(1, f"{header} wants you to sign in with your Ethereum account:"))
    assert (parsed.scheme, parsed.domain) == (scheme, domain)


@pytest.mark.parametrize("value, expected", [
    ("2026-05-01T14:00:00+02:00", ISSUED),
    ("2026-05-01T07:30:00-04:30", ISSUED),
    ("2026-05-01t12:00:00z", ISSUED),
    ("2026-05-01T12:00:00.5Z", ISSUED + timedelta(microseconds=500000)),
    # Nanoseconds, as Go writes them: cut to the microseconds a datetime holds.
    ("2026-05-01T12:00:00.123456789Z", ISSUED + timedelta(microseconds=123456)),
])
def test_times_are_rfc_3339_and_read_as_utc(value, expected):
    parsed = siwe.parse(edited(10, f"Issued At: {value}"))
    assert parsed.issued_at == expected
    assert parsed.issued_at.utcoffset() == timedelta(0)


@pytest.mark.parametrize("uri", [
    "urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
    "https://[::1]:8000/auth?next=%2Fkeys#top",
    "did:key:z6MkhaXgBZDvotDkL5257faiztiGiC2QtKLGpbnnEGta2doK",
    "file:///etc/hosts",
])
def test_the_uri_is_any_rfc_3986_uri(uri):
    assert siwe.parse(edited(6, f"URI: {uri}")).uri == uri


def test_a_big_chain_id_is_read_as_an_integer():
    assert siwe.parse(edited(8, f"Chain ID: {2**256 - 1}")).chain_id == 2**256 - 1


# Every way of being wrong names the first line that is wrong, and what belongs there.

MALFORMED = [
    # A line missing.
    ("header missing", edited(1), 1, "wants you to sign in"),
    ("address missing", edited(2), 2, "wallet address"),
    ("empty line after the address missing", edited(3), 3, "empty line after the address"),
    ("empty line after the statement missing", edited(5), 5, "empty line after the statement"),
    ("second empty line without a statement missing", text(FULL[:3] + FULL[5:]), 4, "two empty lines"),
    ("URI missing", edited(6), 6, '"URI: "'),
    ("Version missing", edited(7), 7, '"Version: "'),
    ("Chain ID missing", edited(8), 8, '"Chain ID: "'),
    ("Nonce missing", edited(9), 9, '"Nonce: "'),
    ("Issued At missing", edited(10), 10, '"Issued At: " and an RFC 3339 date and time'),
    ("ends before Nonce", text(FULL[:8]), 9, "found the end of the message"),
    ("empty text", "", 1, "wants you to sign in"),
    # Lines in the wrong order.
    ("Version and Chain ID swapped", edited(7, FULL[7], FULL[6]), 7, "found the Chain ID line"),
    ("address before the header", text([FULL[1], FULL[0]] + FULL[2:]), 1, "wants you to sign in"),
    ("Not Before before Expiration Time", text(FULL[:10] + [FULL[11], FULL[10]] + FULL[12:]), 12,
     "Expiration Time line is out of place"),
    ("Expiration Time twice", edited(12, FULL[10]), 12, "out of place or repeated"),
    ("Resources before Request ID", text(FULL[:12] + FULL[13:] + [FULL[12]]), 15, "resource"),
    ("an unknown line after Issued At", edited(13, "Request-ID: x"), 13, '"Request ID: "'),
    # The header.
    ("header reworded", edited(1, "identity.example.com wants you to sign in with your Ethereum wallet:"), 1,
     "wants you to sign in"),
    ("no domain", edited(1, " wants you to sign in with your Ethereum account:"), 1, "no host"),
    ("a path after the domain", edited(1, "example.com/login wants you to sign in with your Ethereum account:"),
     1, "host"),
    ("a space in the domain", edited(1, "my site wants you to sign in with your Ethereum account:"), 1, "host"),
    ("a bad scheme", edited(1, "1http://example.com wants you to sign in with your Ethereum account:"), 1,
     "scheme"),
    ("a port that is not digits", edited(1, "example.com:https wants you to sign in with your Ethereum account:"),
     1, "port"),
    ("an IPv6 zone", edited(1, "[fe80::1%eth0] wants you to sign in with your Ethereum account:"), 1, "IPv6"),
    # The address.
    ("39 hex digits", edited(2, ADDRESS[:-1]), 2, "0x and 40 hex digits"),
    ("not hex", edited(2, ADDRESS[:-1] + "g"), 2, "0x and 40 hex digits"),
    ("an ENS name", edited(2, "vitalik.eth"), 2, "0x and 40 hex digits"),
    ("0X", edited(2, "0X" + ADDRESS[2:]), 2, "0x and 40 hex digits"),
    ("lower case", edited(2, ADDRESS.lower()), 2, "all lower case, which carries no EIP-55 checksum"),
    ("upper case", edited(2, "0x" + ADDRESS[2:].upper()), 2, "all upper case"),
    ("one letter's case changed", edited(2, ADDRESS.replace("C02a", "C02A")), 2, "fails its EIP-55 checksum"),
    # The statement.
    ("a % in the statement", edited(4, "100% yours"), 4, "'%'"),
    ("a quote in the statement", edited(4, 'Say "yes"'), 4, "'\"'"),
    ("a non-ASCII statement", edited(4, "Connexion à Identity"), 4, "U+00E0"),
    ("a tab in the statement", edited(4, "Sign\tin"), 4, "U+0009"),
    # Version, chain id, nonce.
    ("version 2", edited(7, "Version: 2"), 7, "the only one EIP-4361 defines"),
    ("version 1.0", edited(7, "Version: 1.0"), 7, "the only one EIP-4361 defines"),
    ("chain id not a number", edited(8, "Chain ID: mainnet"), 8, "decimal digits"),
    ("chain id empty", edited(8, "Chain ID: "), 8, "decimal digits"),
    ("chain id negative", edited(8, "Chain ID: -1"), 8, "decimal digits"),
    ("chain id in hex", edited(8, "Chain ID: 0x1"), 8, "decimal digits"),
    ("chain id of 2**256", edited(8, f"Chain ID: {2**256}"), 8, "below 2**256"),
    ("chain id of 5000 digits", edited(8, "Chain ID: " + "9" * 5000), 8, "decimal digits"),
    ("nonce of 7 characters", edited(9, "Nonce: Kq3m8Zt"), 9, "at least 8 letters and digits"),
    ("nonce with a dash", edited(9, "Nonce: Kq3m8Zt-P0aR7"), 9, "letters and digits"),
    ("nonce with non-ASCII digits", edited(9, "Nonce: 12345678\u0663"), 9, "U+0663"),
    # Times.
    ("a space for T", edited(10, "Issued At: 2026-05-01 12:00:00Z"), 10, "RFC 3339"),
    ("no offset", edited(10, "Issued At: 2026-05-01T12:00:00"), 10, "RFC 3339"),
    ("no seconds", edited(10, "Issued At: 2026-05-01T12:00Z"), 10, "RFC 3339"),
    ("a Unix time", edited(10, "Issued At: 1777636800"), 10, "RFC 3339"),
    ("February 30th", edited(10, "Issued At: 2026-02-30T12:00:00Z"), 10, "not a date and time that exists"),
    ("hour 24", edited(10, "Issued At: 2026-05-01T24:00:00Z"), 10, "not a date and time that exists"),
    ("a leap second", edited(10, "Issued At: 2016-12-31T23:59:60Z"), 10, "not a date and time that exists"),
    ("offset of 24 hours", edited(10, "Issued At: 2026-05-01T12:00:00+24:00"), 10, "not a date and time"),
    ("year 0", edited(10, "Issued At: 0000-05-01T12:00:00Z"), 10, "not a date and time that exists"),
    ("beyond 9999 in UTC", edited(10, "Issued At: 9999-12-31T23:00:00-05:00"), 10, "not a date and time"),
    ("a bad Expiration Time", edited(11, "Expiration Time: tomorrow"), 11, "Expiration Time"),
    ("a bad Not Before", edited(12, "Not Before: 2026-05-01T11:59:00+0100"), 12, "Not Before"),
    ("Not Before without its space", edited(12, "Not Before:2026-05-01T11:59:00Z"), 12, '"Not Before: "'),
    # URIs, request id, resources.
    ("a URI without a scheme", edited(6, "URI: identity.example.com/auth/siwe"), 6, "scheme"),
    ("a space in the URI", edited(6, "URI: https://identity.example.com/auth siwe"), 6, "path"),
    ("a bad escape in the URI", edited(6, "URI: https://identity.example.com/%zz"), 6, "path"),
    ("a request id with a slash", edited(13, "Request ID: a/b"), 13, "pchar"),
    ("text after Resources:", edited(14, "Resources: https://identity.example.com/terms"), 14, "alone"),
    ("a resource without its dash", edited(15, "https://identity.example.com/terms"), 15, '"- "'),
    ("a resource that is no URI", edited(15, "- the terms"), 15, "scheme"),
    # Lines after the end, and line ends.
    ("a final line feed", text(FULL) + "\n", 16, "not with a line feed"),
    ("a final line feed after Issued At", text(FULL[:10]) + "\n", 11, "not with a line feed"),
    ("an empty line in the middle of the fields", edited(8, "", FULL[7]), 8, "found an empty line"),
    ("a line after the resources", text(FULL + ["Signed: yes"]), 16, "a resource"),
    ("two lines after Issued At", text(FULL[:10] + ["", ""]), 11, "or the end of the message"),
    ("CR LF line ends", text(FULL).replace("\n", "\r\n"), 1, "carriage return"),
    ("a CR LF from line 6 on", text(FULL[:6]) + "\r\n" + "\r\n".join(FULL[6:]), 6, "carriage return"),
    ("a NUL", edited(9, "Nonce: Kq3m8ZtP\x000aR7wXy2bC5d"), 9, "U+0000"),
]


@pytest.mark.parametrize("message, line, words", [case[1:] for case in MALFORMED], ids=[case[0] for case in MALFORMED])
def test_a_malformed_message_is_refused_naming_its_first_wrong_line(message, line, words):
    error = refused(message)
    assert error.line == line, error
    assert words in error.detail, error
    assert str(error) == f"line {line}: {error.detail}"


def test_the_checksummed_form_of_a_lower_case_address_is_named():
    assert refused(edited(2, ADDRESS.lower())).detail.endswith(ADDRESS)


def test_a_huge_message_is_refused_before_it_is_read():
    error = refused(text(FULL) + "\n- https://identity.example.com/" + "a" * siwe.MAX_MESSAGE_LENGTH)
    assert error.line is None
    assert str(siwe.MAX_MESSAGE_LENGTH) in error.detail


@pytest.mark.parametrize("value", [None, b"example.com wants you to sign in", 42])
def test_what_is_not_text_is_refused(value):
    assert refused(value).line is None


# Bounded work on any text: parse raises MessageError or nothing.

FIELD_LINES = st.sampled_from(FULL) | st.text(alphabet=string.printable, max_size=80)


@st.composite
def edited_messages(draw):
    """FULL with lines removed, repeated, swapped or replaced: the mistakes a hand or a program makes."""
    lines = list(FULL)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["remove", "repeat", "swap", "replace", "insert"]))
        if action == "remove" and len(lines) > 1:
            del lines[index]
        elif action == "repeat":
            lines.insert(index, lines[index])
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[index], lines[other] = lines[other], lines[index]
        elif action == "replace":
            lines[index] = draw(FIELD_LINES)
        else:
            lines.insert(index, draw(FIELD_LINES))
    return text(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(max_size=400), edited_messages()))
def test_parse_raises_only_message_errors(message):
    try:
        parsed = siwe.parse(message)
    except siwe.MessageError as error:
        assert error.line is None or 1 <= error.line <= message.count("\n") + 2
    else:
        assert isinstance(parsed, siwe.SiweMessage)


@settings(max_examples=100, deadline=None)
@given(
    statement=st.none() | st.text(alphabet=string.ascii_letters + string.digits + " -._~:/?#[]@!$&'()*+,;=",
                                  min_size=1, max_size=60).filter(lambda value: not value.startswith("URI: ")),
    chain_id=st.integers(0, 2**256 - 1),
    nonce=st.text(alphabet=siwe.NONCE_ALPHABET, min_size=8, max_size=40),
    issued_at=st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC)),
    request_id=st.none() | st.text(alphabet=string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@", max_size=30),
)
def test_a_message_written_from_its_fields_reads_back_as_them(statement, chain_id, nonce, issued_at, request_id):
    lines = [FULL[0], ADDRESS, ""] + ([statement, ""] if statement is not None else [""])
    lines += [FULL[5], "Version: 1", f"Chain ID: {chain_id}", f"Nonce: {nonce}",
              "Issued At: " + issued_at.isoformat().replace("+00:00", "Z")]
    if request_id is not None:
        lines.append(f"Request ID: {request_id}")
    parsed = siwe.parse(text(lines))
    assert (parsed.statement, parsed.chain_id, parsed.nonce) == (statement, chain_id, nonce)
    assert (parsed.issued_at, parsed.request_id) == (issued_at, request_id)


# Messages written from their fields (text_of), read back by the parser and by eth_utils.

@pytest.mark.parametrize("message", [EIP_IMPLICIT_SCHEME, EIP_IMPLICIT_SCHEME_EXPLICIT_PORT, EIP_EXPLICIT_SCHEME,
                                     text(FULL), text(FULL[:10]), edited(4), edited(4, "")])
def test_a_message_written_from_its_fields_is_the_text_they_were_read_from(message):
    assert siwe.text_of(siwe.parse(message)) == message


def test_a_time_is_written_in_utc_to_the_microsecond_it_has():
    offset = timezone(timedelta(hours=2))
    message = siwe.parse(text(FULL[:10]))
    for moment, written in ((datetime(2026, 5, 1, 14, 0, tzinfo=offset), "2026-05-01T12:00:00Z"),
                            (datetime(2026, 5, 1, 12, 0, 0, 120, tzinfo=UTC), "2026-05-01T12:00:00.000120Z")):
        lines = siwe.text_of(dataclasses.replace(message, issued_at=moment)).split("\n")
        assert lines[-1] == f"Issued At: {written}"


_MOMENTS = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9000, 1, 1), timezones=st.just(UTC))


@settings(max_examples=200, deadline=None)
@given(
    scheme=st.none() | st.sampled_from(["https", "http", "web+siwe"]),
    domain=st.sampled_from(["identity.example.com", "localhost:8000", "[2001:db8::1]:8443", "192.0.2.7"]),
    address=st.binary(min_size=20, max_size=20).map(to_checksum_address),
    statement=st.none() | st.text(alphabet=string.ascii_letters + string.digits + " -._~:/?#[]@!$&'()*+,;=",
                                  max_size=60).filter(lambda value: not value.startswith("URI: ")),
    uri=st.sampled_from(["https://identity.example.com", "http://127.0.0.1:8000/admin", "urn:example:login"]),
    chain_id=st.integers(0, 2**256 - 1),
    nonce=st.text(alphabet=siwe.NONCE_ALPHABET, min_size=8, max_size=40),
    issued_at=_MOMENTS, expiration_time=st.none() | _MOMENTS, not_before=st.none() | _MOMENTS,
    request_id=st.none() | st.text(alphabet=string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@", max_size=30),
    resources=st.none() | st.lists(st.sampled_from(["https://identity.example.com/terms", "ipfs://bafybeie/"]),
                                   max_size=3).map(tuple),
)
def test_any_message_written_from_its_fields_reads_back_as_them(**fields):
    message = siwe.SiweMessage(version=siwe.VERSION, **fields)
    written = siwe.text_of(message)
    assert siwe.parse(written) == message
    # Read without this module: the second line is the address in its EIP-55 form, as eth_utils checks it.
    assert written.split("\n")[1] == fields["address"] and is_checksum_address(written.split("\n")[1])


# Time checks.

def test_a_message_within_its_times_passes():
    siwe.check_times(siwe.parse(text(FULL)), ISSUED + timedelta(minutes=1))


def test_issued_at_may_be_at_most_five_minutes_ahead():
    message = siwe.parse(text(FULL[:10]))
    siwe.check_times(message, ISSUED - timedelta(minutes=5))
    with pytest.raises(siwe.TimeCheckError) as caught:
        siwe.check_times(message, ISSUED - timedelta(minutes=5, seconds=1))
    assert caught.value.field == "Issued At"
    assert "5 minutes in the future" in caught.value.detail


def test_the_allowance_for_clocks_ahead_is_a_parameter():
    message = siwe.parse(text(FULL[:10]))
    with pytest.raises(siwe.TimeCheckError, match="30 seconds in the future"):
        siwe.check_times(message, ISSUED - timedelta(minutes=1), max_future=timedelta(seconds=30))


def test_a_message_is_refused_from_its_expiration_time_on():
    message = siwe.parse(text(FULL))
    siwe.check_times(message, ISSUED + timedelta(minutes=10) - timedelta(microseconds=1))
    with pytest.raises(siwe.TimeCheckError) as caught:
        siwe.check_times(message, ISSUED + timedelta(minutes=10))
    assert caught.value.field == "Expiration Time"


def test_a_message_is_refused_before_its_not_before():
    message = siwe.parse(text(FULL))
    siwe.check_times(message, ISSUED - timedelta(minutes=1))
    with pytest.raises(siwe.TimeCheckError) as caught:
        siwe.check_times(message, ISSUED - timedelta(minutes=1, microseconds=1))
    assert caught.value.field == "Not Before"


def test_issued_at_is_checked_before_expiration_time():
    # Issued at 12:00, expired at 11:00: read at 11:30 with no allowance, both fail.
    message = siwe.parse(text(FULL[:10] + ["Expiration Time: 2026-05-01T11:00:00Z"]))
    with pytest.raises(siwe.TimeCheckError) as caught:
        siwe.check_times(message, ISSUED - timedelta(minutes=30), max_future=timedelta(0))
    assert caught.value.field == "Issued At"


def test_times_in_other_offsets_compare_as_instants():
    message = siwe.parse(edited(11, "Expiration Time: 2026-05-01T14:10:00+02:00"))
    with pytest.raises(siwe.TimeCheckError, match="Expiration Time"):
        siwe.check_times(message, datetime(2026, 5, 1, 12, 10, tzinfo=UTC))


# Signatures: their form is checked before any recovery.

def signature(r=int("11" * 32, 16), s=int("22" * 32, 16), v=27):
    return "0x" + r.to_bytes(32, "big").hex() + s.to_bytes(32, "big").hex() + bytes([v]).hex()


@pytest.mark.parametrize("value, words", [
    (None, "as text"),
    (bytes(65), "as text"),
    ("11" * 65, "does not start with 0x"),
    ("0x" + "11" * 64, "128 characters after 0x"),
    ("0x" + "11" * 66, "132 characters after 0x"),
    ("0x", "0 characters after 0x"),
    ("0x" + "1g" * 65, "not a hex digit"),
    ("0x" + "11" * 64 + " 1", "not a hex digit"),
    ("0x" + "\u0661" * 130, "not a hex digit"),
    (signature(v=29), "v is 29"),
    (signature(v=35), "v is 35"),
    (signature(r=0), "r is 0"),
    (signature(r=SECP256K1_N), "r is 0 or not below"),
    (signature(s=0), "s is 0"),
    (signature(s=SECP256K1_N // 2 + 1), "upper half"),
    (signature(s=SECP256K1_N - 1), "upper half"),
    # r = 5 is no point's x on secp256k1: eth-account's own BadSignature, as a SignatureError.
    (signature(r=5, s=7), "No key can have made"),
])
def test_a_malformed_signature_is_a_signature_error(value, words):
    with pytest.raises(SignatureError) as caught:
        siwe.recover_personal_sign(text(FULL), value)
    assert words in caught.value.detail


@settings(max_examples=200, deadline=None)
@given(r=st.integers(0, 2**256 - 1), s=st.integers(0, 2**256 - 1), v=st.sampled_from([0, 1, 27, 28, 29, 255]))
def test_any_65_bytes_recover_to_a_wallet_or_are_a_signature_error(r, s, v):
    try:
        address = siwe.recover_personal_sign(text(FULL), signature(r, s, v))
    except SignatureError:
        return
    assert address.startswith("0x") and len(address) == 42


# Signatures made by ethers, an independent wallet, recovered here.

@pytest.fixture(scope="module")
def signed(ethers):
    """One node run: each wallet's address, and personal_sign signatures of a sign-in message."""
    message = for_wallet(FULL)
    answers = ethers([
        {"op": "address", "privateKey": KEY},
        {"op": "address", "privateKey": OTHER_KEY},
        {"op": "signMessage", "privateKey": KEY, "message": message},
        {"op": "signMessage", "privateKey": OTHER_KEY, "message": message},
        {"op": "signMessage", "privateKey": KEY, "message": EIP_EXPLICIT_SCHEME},
    ])
    address, other_address, signature, other_signature, eip_signature = answers
    return {
        "message": message, "address": address["address"], "other_address": other_address["address"],
        "signature": signature["signature"], "other_signature": other_signature["signature"],
        "eip_signature": eip_signature["signature"],
    }


def test_ethers_and_eth_account_derive_the_same_wallets(signed):
    assert signed["address"] == WALLET
    assert signed["other_address"] == Account.from_key(OTHER_KEY).address != WALLET


def test_an_ethers_signed_sign_in_recovers_to_its_wallet(signed):
    message = siwe.parse(signed["message"])
    assert message.address == WALLET
    assert siwe.recover_personal_sign(signed["message"], signed["signature"]) == WALLET


def test_a_signature_by_another_wallet_recovers_to_that_wallet(signed):
    recovered = siwe.recover_personal_sign(signed["message"], signed["other_signature"])
    assert recovered == signed["other_address"] != siwe.parse(signed["message"]).address


def test_a_signature_of_other_text_recovers_to_another_wallet(signed):
    assert siwe.recover_personal_sign(signed["message"] + " ", signed["signature"]) != WALLET
    assert siwe.recover_personal_sign(EIP_EXPLICIT_SCHEME, signed["eip_signature"]) == WALLET


def test_a_truncated_ethers_signature_is_a_signature_error(signed):
    with pytest.raises(SignatureError, match="128 characters after 0x"):
        siwe.recover_personal_sign(signed["message"], signed["signature"][:-2])


def test_ethers_signs_with_the_lower_s_and_27_or_28(signed):
    raw = bytes.fromhex(signed["signature"][2:])
    assert int.from_bytes(raw[32:64], "big") <= SECP256K1_N // 2 and raw[64] in (27, 28)


def test_an_eth_account_signature_is_verified_by_ethers_too(ethers, signed):
    made_here = Account.sign_message(encode_defunct(text=signed["message"]), KEY).signature.to_0x_hex()
    [verified] = ethers([{"op": "verifyMessage", "message": signed["message"], "signature": made_here}])
    assert verified == {"address": WALLET}
