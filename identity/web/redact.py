"""A logging filter that blanks API keys out of every log line, whoever writes it.

The service never logs a header, but the server may: gunicorn's parser names the line it could not
read, and a header line without its colon (`x-api-key idsk_...`) would carry a key into its
WARNING. Each handler of logging_config() runs this filter, gunicorn's lines included.
"""

import copy
import logging
import re

from ..core.keys import KEY_PREFIX

# A key is the prefix and URL-safe base64 (identity.web.auth); anything that starts like one is blanked,
# a truncated or mangled key too.
_KEY = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_\-]*")
REDACTED = KEY_PREFIX + "[redacted]"


def redact(text):
    return _KEY.sub(REDACTED, text)


class RedactKeys(logging.Filter):
    """Rewrite a record whose message or exception text holds a key; pass every record on."""

    def filter(self, record):
        message = record.getMessage()
        if KEY_PREFIX in message:
            record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and KEY_PREFIX in record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def redact_keys(config):
    """`config` (a logging.config.dictConfig mapping) with RedactKeys run by each of its handlers."""
    config = copy.deepcopy(config)
    config.setdefault("filters", {})["redact_keys"] = {"()": RedactKeys}
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "redact_keys"]
    return config
