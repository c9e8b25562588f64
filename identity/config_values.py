"""The kinds of value the settings take (identity.config): marshmallow fields, and the functions that read
the service's own kinds of value from a variable's text. Each refuses a value with a ValidationError whose
words follow the variable's name: what the value must be, and what it is."""

import ipaddress
import logging
import re
from urllib.parse import urlsplit

from limits import parse_many
from marshmallow import ValidationError, fields, validate

from .core import uris

NAMESPACE_PATTERN = re.compile(r"[a-z0-9]+")
TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def whole(default, low=None, high=None, **options):
    """A whole number, `low` to `high` (inclusive) when given."""
    if low is not None and high is not None:
        bound = validate.Range(low, high, error="must be {min:,} to {max:,}, not {input}")
    elif low is not None:
        bound = validate.Range(low, error="must be {min} or more, not {input}")
    else:
        bound = None
    return fields.Integer(load_default=default, validate=bound, **options,
                          error_messages={"invalid": "must be a whole number, not {input!r}"})


def seconds(default, low=0.0, high=None):
    """A number of seconds: at least `low`, at most `high` when given, never infinite."""
    words = f"must be a number of seconds of at least {low:g}" + (f" and up to {high:g}" if high else "")
    return fields.Float(load_default=default, allow_nan=False, validate=validate.Range(low, high, error=f"{words}, not {{input:g}}"),
                        error_messages={"invalid": "must be a number of seconds, not {input!r}",
                                        "special": f"{words}, not infinity or NaN"})


def parsed(function, default=None, **options):
    """A value that `function` reads from the variable's text (raising ValidationError when it cannot)."""
    return fields.Function(deserialize=function, load_default=default, **options)


def boolean(raw):
    """1, true, yes or on; 0, false, no or off; in any case."""
    word = raw.strip().lower()
    if word not in TRUE | FALSE:
        raise ValidationError(f"must be true or false (or 1, yes, on / 0, no, off), not {raw!r}")
    return word in TRUE


def choice(*choices):
    """A reader of one of `choices` (lower-case), in any case."""
    def read(raw):
        if (value := raw.strip().lower()) not in choices:
            raise ValidationError(f"must be one of {', '.join(choices)}, not {value!r}")
        return value
    return read


def rate_limit(raw):
    try:
        parse_many(raw)
    except ValueError:
        raise ValidationError(f"must be a rate limit such as 120/minute, not {raw!r}") from None
    return raw


def log_level_name(raw):
    if (level := raw.strip().upper()) not in logging.getLevelNamesMapping():
        raise ValidationError(f"must be DEBUG, INFO, WARNING, ERROR or CRITICAL, not {level!r}")
    return level


def namespace(raw):
    if not NAMESPACE_PATTERN.fullmatch(raw):
        raise ValidationError(f"must be lower-case letters and digits, not {raw!r}")
    return raw


def siwe_domain(raw):
    """An RFC 3986 authority: the host users sign in to, and its port when not the default."""
    domain = raw.strip()
    if domain.startswith(("http:", "https:")) or uris.authority_problem(domain, host_required=True):
        raise ValidationError("must be the host users sign in to, with its port when not the default "
                              f"(e.g. identity.example.com or 127.0.0.1:8000), not {domain!r}")
    return domain


def siwe_uri(raw):
    """An absolute URI with a host: a message's URI must be at its origin."""
    uri = raw.strip()
    if uris.uri_problem(uri) or not has_origin(uri):
        raise ValidationError(f"must be an absolute URI with a host, such as https://identity.example.com, not {uri!r}")
    return uri


def has_origin(uri):
    """Whether `uri` names a host, and a port that is a number when it names one."""
    parts = urlsplit(uri)
    try:
        parts.port  # noqa: B018 - read for the ValueError of a port that is not a number
    except ValueError:
        return False
    return bool(parts.hostname)


def is_chain_id(text):
    return text.isascii() and text.isdigit() and len(text) <= 78


def chain_ids(raw):
    """EIP-155 chain ids, comma-separated: sorted, each once."""
    items = [item.strip() for item in raw.split(",")]
    if not all(map(is_chain_id, items)):
        raise ValidationError(f"must be chain ids in decimal digits separated by commas (e.g. 1,10), not {raw.strip()!r}")
    return tuple(sorted({int(item) for item in items}))


def rpc_urls(raw):
    """Ethereum JSON-RPC endpoints by chain id, `1=https://…,8453=https://…`: {chain id: URL}. An operator's
    setting: any http(s) URL is taken, private and loopback addresses included."""
    urls = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        chain, _, url = (text.strip() for text in item.partition("="))
        if not is_chain_id(chain) or uris.uri_problem(url) or not url.lower().startswith(("http://", "https://")) \
                or not urlsplit(url).hostname:
            raise ValidationError("must be chain ids and their http(s) JSON-RPC URLs, as "
                                  f"1=https://rpc.example,8453=https://base.example, not {item!r}")
        if int(chain) in urls:
            raise ValidationError(f"names chain {int(chain)} twice; give each chain one URL")
        urls[int(chain)] = url
    return urls


def proxies(raw):
    """The proxies trusted to name a client in X-Forwarded-For: addresses or networks, comma-separated, or *."""
    text = raw.strip()
    if text != "*":
        try:
            for item in text.split(","):
                ipaddress.ip_network(item.strip(), strict=False)
        except ValueError:
            raise ValidationError(f"must be IP addresses or networks separated by commas, or *, not {text!r}") from None
    return text


def backup_url(raw):
    """s3://BUCKET/PREFIX, file:///FOLDER or a plain folder path."""
    url = raw.strip()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme == "s3" and not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", url.partition("://")[2].partition("/")[0]):
        raise ValidationError("must name a bucket (3 to 63 lower-case letters, digits, dots or hyphens) as in "
                              f"s3://BUCKET/PREFIX, not {url!r}")
    if scheme not in ("", "file", "s3"):
        raise ValidationError(f"must be s3://BUCKET/PREFIX, file:///FOLDER or a folder's path, not a {scheme}:// URL")
    if scheme == "file" and not url.startswith("file:///"):
        raise ValidationError(f"must be a file URL with an absolute path (file:///srv/backups), not {url!r}")
    return url


def cron(raw):
    """A cron expression in UTC (five fields, or six with seconds last), its fields one space apart."""
    from croniter import croniter

    text = " ".join(raw.split())
    if len(text.split()) not in (5, 6) or not croniter.is_valid(text):
        raise ValidationError(f"must be a cron expression in UTC such as '0 3 * * *' (minute hour day month "
                              f"weekday), not {text!r}")
    return text


def is_age_identity(text):
    import pyrage

    try:
        pyrage.x25519.Identity.from_str(text)
    except pyrage.IdentityError:
        return False
    return True


def age_identity(raw):
    """An age identity (AGE-SECRET-KEY-1...); a message never shows it."""
    if not is_age_identity(raw.strip()):
        raise ValidationError("must hold an age secret key (AGE-SECRET-KEY-1..., made by `age-keygen`); what is "
                              "there is not one (it is not shown)")
    return raw.strip()


def age_identity_file(raw):
    """The age identity in the file at `raw`: its first line that is not a `#` comment; None when it has none."""
    try:
        with open(raw.strip(), encoding="utf-8") as file:
            lines = [line.strip() for line in file if line.strip() and not line.startswith("#")]
    except OSError as error:
        raise ValidationError(f"names a file that cannot be read ({error.strerror or error}): {raw.strip()}") from None
    if lines and not is_age_identity(lines[0]):
        raise ValidationError("names a file that does not hold an age secret key (AGE-SECRET-KEY-1..., made by "
                              "`age-keygen`) on its first line that is not a comment (the line is not shown)")
    return lines[0] if lines else None
