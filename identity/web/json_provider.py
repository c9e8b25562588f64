"""JSON responses encoded by orjson: the same documents as the standard library's, several times faster."""

import json

import orjson
from flask.json.provider import DefaultJSONProvider, JSONProvider


class OrjsonProvider(JSONProvider):
    """Flask's JSON provider interface (dumps and loads) implemented with orjson.

    Keys keep their order (the contract's field order). What orjson refuses (an integer of more than
    64 bits, a keyword argument such as indent) is encoded by the standard library instead; values of
    other types (dates, decimals, UUIDs) are converted as Flask's default provider converts them.
    """

    def dumps(self, obj, **kwargs):
        if not kwargs:
            try:
                return orjson.dumps(obj, default=DefaultJSONProvider.default).decode()
            except TypeError:  # orjson.JSONEncodeError is a TypeError
                pass
        kwargs.setdefault("default", DefaultJSONProvider.default)
        return json.dumps(obj, **kwargs)

    def loads(self, s, **kwargs):
        return json.loads(s, **kwargs) if kwargs else orjson.loads(s)


def init_app(app):
    app.json = OrjsonProvider(app)
