"""RFC 3986's URI and authority, checked as EIP-4361 messages use them (identity/core/siwe.py).

Each check walks its text once, character by character, and says in words what is wrong: a sign-in
message's error names the part of a URI that a wallet user should look at.
"""

import ipaddress
import re
import string

UNRESERVED = frozenset(string.ascii_letters + string.digits + "-._~")
SUB_DELIMS = frozenset("!$&'()*+,;=")
RESERVED = SUB_DELIMS | frozenset(":/?#[]@")
USERINFO = UNRESERVED | SUB_DELIMS | {":"}
REG_NAME = UNRESERVED | SUB_DELIMS
PCHAR = UNRESERVED | SUB_DELIMS | {":", "@"}
PATH = PCHAR | {"/"}
QUERY = PCHAR | {"/", "?"}
SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")

_DIGITS = frozenset(string.digits)
_HEX = frozenset(string.hexdigits)
_IP_FUTURE = re.compile(r"[vV][0-9A-Fa-f]+\.[A-Za-z0-9\-._~!$&'()*+,;=:]+")


def first_bad(text, allowed, percent_encoded=False):
    """The index of text's first character outside `allowed` (and, if percent_encoded, not part of a %XX
    escape), or None."""
    index = 0
    while index < len(text):
        character = text[index]
        if percent_encoded and character == "%":
            if len(text) < index + 3 or not _HEX.issuperset(text[index + 1:index + 3]):
                return index
            index += 3
        elif character in allowed:
            index += 1
        else:
            return index
    return None


def authority_problem(authority, host_required):
    """What keeps `authority` from being RFC 3986's [userinfo "@"] host [":" port], in words, or None."""
    userinfo, at, host_port = authority.rpartition("@")
    if at and first_bad(userinfo, USERINFO, percent_encoded=True) is not None:
        return "its user information holds a character that RFC 3986 does not allow there"
    if host_port.startswith("["):
        literal, bracket, port = host_port[1:].partition("]")
        if not bracket or not _ip_literal(literal):
            return "its host is not an IPv6 address (or IPvFuture literal) between [ and ]"
        if port and not port.startswith(":"):
            return "its IP literal is followed by something other than :port"
        port = port[1:]
    else:
        host, _, port = host_port.partition(":")
        if first_bad(host, REG_NAME, percent_encoded=True) is not None:
            return "its host holds a character that a host name may not"
        if host_required and not host:
            return "it has no host"
    if not _DIGITS.issuperset(port):
        return "its port is not digits alone"
    return None


def _ip_literal(literal):
    if _IP_FUTURE.fullmatch(literal):
        return True
    # ipaddress also reads a zone ("%eth0"), which RFC 3986's IPv6address has not.
    if "%" in literal:
        return False
    try:
        ipaddress.IPv6Address(literal)
    except ValueError:
        return False
    return True


def uri_problem(uri):
    """What keeps `uri` from being an RFC 3986 URI, scheme ":" hier-part ["?" query] ["#" fragment], or None."""
    scheme, colon, rest = uri.partition(":")
    if not colon or not SCHEME.fullmatch(scheme):
        return "it does not start with a scheme (a letter, then letters, digits, +, - or .) and a colon"
    rest, hash_mark, fragment = rest.partition("#")
    if hash_mark and first_bad(fragment, QUERY, percent_encoded=True) is not None:
        return "its fragment holds a character that a URI may not"
    rest, question_mark, query = rest.partition("?")
    if question_mark and first_bad(query, QUERY, percent_encoded=True) is not None:
        return "its query holds a character that a URI may not"
    path = rest
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if problem := authority_problem(authority, host_required=False):
            return problem
        path = slash + path
    if first_bad(path, PATH, percent_encoded=True) is not None:
        return "its path holds a character that a URI may not"
    return None
