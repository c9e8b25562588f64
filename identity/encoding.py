"""JSON responses encoded by orjson: the same documents as the standard library's, several times faster."""

import orjson
from flask.json.provider import DefaultJSONProvider

_OPTIONS = orjson.OPT_NON_STR_KEYS


class OrjsonProvider(DefaultJSONProvider):
    """Flask's JSON provider with orjson doing the encoding.

    Keys keep their order (the contract's field order), and anything orjson refuses (an integer of
    more than 64 bits, an unusual type) is encoded by Flask's own provider instead.
    """

    sort_keys = False

    def dumps(self, obj, **kwargs):
        return self._encode(obj, **kwargs).decode()

    def response(self, *args, **kwargs):
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(self._encode(obj), mimetype=self.mimetype)

    def _encode(self, obj, **kwargs):
        if not kwargs:
            try:
                return orjson.dumps(obj, default=self.default, option=_OPTIONS)
            except orjson.JSONEncodeError:
                pass
        return super().dumps(obj, **kwargs).encode()


def init_app(app):
    app.json = OrjsonProvider(app)
