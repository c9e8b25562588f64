"""What the mirrors' tests share: Identity docs and feed entries made as an upstream makes them (and
tampered with), a mirror's state as GET /mirrors/<id> shows it and a wait for it, the identities stored, and
an upstream that lies: a small HTTP server on 127.0.0.1 that answers GET /changes in the contract's shape
with whatever entries a test gives it."""

import json
import time
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak

from identity.core import authorship, content
from identity.data import mirrors
from identity.storage.database import db
from identity.storage.models import Identity
from tests.common.loopback import Loopback

CREATOR_KEY = "0x" + keccak(b"tests/mirroring creator").hex()
CREATOR = Account.from_key(CREATOR_KEY).address
OTHER_KEY = "0x" + keccak(b"tests/mirroring someone else").hex()
AT = "2026-11-21T09:30:00.123456Z"


def sign(content_id, key=CREATOR_KEY):
    """The EIP-712 authorship signature of `content_id` by `key` (identity.core.authorship)."""
    return Account.sign_message(encode_typed_data(full_message=authorship.typed_data(content_id)), key).signature.to_0x_hex()


def doc(number, creator=CREATOR, status="complete", signature=None, **changes):
    """An Identity as an upstream's feed carries it, numbered `number`: its ids the addresses of its content."""
    fields = {"display_name": f"Upstream identity {number}", "description": f"Number {number}."}
    address = content.address(fields)
    user = {"id": f"00000000-0000-4000-8000-{9_000_000 + number:012d}", "created_at": AT, "updated_at": AT,
            "last_login": None, "api_key": "", "wallet": creator, "role": "User"}
    made = {
        "id": f"00000000-0000-4000-8000-{number:012d}", "identity_id": address.identity_id,
        "identity_hash": address.identity_hash, "vault_id": "0", "display_name": fields["display_name"],
        "description": fields["description"], "image": None, "corpora_id": None, "semantic": None,
        "external_reference": None, "creator": user, "created_at": AT, "updated_at": AT, "num_positions": 0,
        "assets_sum": "0", "conviction_sum": "0", "conviction_price": "0", "status": status, "isUser": False,
        "user_conviction": "0", "user_conviction_value": "0",
    }
    if signature is not None:
        made["creator_signature"] = signature
    made.update(changes)
    return made


def entry(seq, identity, kind="created", fields=None):
    """A feed entry of `identity` (a doc) with its doc, as include_docs=true gives it."""
    return {"seq": seq, "identity_id": identity["identity_id"], "at": AT, "wallet": CREATOR, "kind": kind,
            "fields": fields, "doc": identity}


def redacted(seq, identity_id, kind="changed"):
    """An entry as a non-Admin key sees it once its identity is removed: no doc, no wallet, no fields."""
    return {"seq": seq, "identity_id": identity_id, "at": AT, "kind": kind}


def tampered(number):
    """A doc whose display name was changed after its ids were made: its content no longer hashes to them."""
    return doc(number, display_name=f"Upstream identity {number}, altered")


def wrong_id(number):
    """A doc whose identity_id names another content (that of `number` + 1000)."""
    other = doc(number + 1000)
    return doc(number, identity_id=other["identity_id"], identity_hash=other["identity_hash"])


def forged(number):
    """A doc whose creator_signature was made by another key than its creator's."""
    made = doc(number)
    return {**made, "creator_signature": sign(content.address(made).content_id, OTHER_KEY)}


def now():
    return datetime.now(UTC)


def state(app, mirror_id):
    """The mirror's state, as GET /mirrors/<id> shows it."""
    with app.app_context():
        return mirrors.state(mirrors.get(mirror_id))


def wait_for(app, mirror_id, condition, timeout=30):
    """The mirror's state once condition(state) holds; the test fails if it does not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition(found := state(app, mirror_id)):
        assert time.monotonic() < deadline, f"the mirror never got there: {found}"
        time.sleep(0.1)
    return found


def stored(app):
    """The identity_ids the app's database holds."""
    with app.app_context():
        found = {identity.identity_id for identity in db.session.query(Identity)}
        db.session.commit()
    return found


class LyingUpstream(Loopback):
    """GET /changes in the contract's shape (feed=eventsource, longpoll and normal, Feed-Head) from the
    entries a test sets, whatever they hold. `status`, when set, is answered instead (as a problem),
    except to a request after 0 when `refuse_after_start` (an upstream restored from an older backup
    refusing a position beyond its end). `streams` False answers event streams with a JSON page, as a
    proxy that does not stream might. `requests` records each request's query and x-api-key."""

    def __init__(self, entries=(), streams=True):
        self.entries = list(entries)
        self.streams = streams
        self.status = None
        self.refuse_after_start = False
        self.requests = []
        super().__init__(GET=self.answer)

    def answer(self, handler):
        parts = urlsplit(handler.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        self.requests.append({"path": parts.path, "query": query, "key": handler.headers.get("x-api-key")})
        after = int(handler.headers.get("Last-Event-ID") or query.get("after") or 0)
        if self.status is not None and not (self.refuse_after_start and after == 0):
            return self._send(handler, self.status, "application/problem+json",
                              {"type": "about:blank", "title": "Refused", "status": self.status,
                               "detail": f"refused with {self.status}"})
        entries = [each for each in self.entries if each["seq"] > after][: int(query.get("limit") or 100)]
        head = max((each["seq"] for each in self.entries), default=0)
        if query.get("feed") == "eventsource" and self.streams:
            body = ": ok\n" + "".join(f"id: {each['seq']}\nevent: change\ndata: {json.dumps(each)}\n\n" for each in entries)
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream")
            handler.send_header("Feed-Head", str(head))
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(body.encode())
            handler.close_connection = True  # the stream ends; the mirror comes back with Last-Event-ID
            return None
        page = {"data": entries, "next_after": entries[-1]["seq"] if entries else after}
        return self._send(handler, 200, "application/json", page, {"Feed-Head": str(head)})

    @staticmethod
    def _send(handler, status, content_type, body, headers=None):
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
