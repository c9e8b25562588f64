"""The chain's append and hash: canonical JSON that is RFC 8785's byte for byte, and one chain whatever head a
process last saw (its own rolled back, or another writer's since)."""

from types import SimpleNamespace

import pytest
import rfc8785

from identity.core import audit, keys
from identity.storage.database import db, write_transaction
from tests.common.apps import make_app
from tests.common.audit import entries, verified

# Every code point of the first three planes' first 0x3000 (control characters, Latin, the BMP's escapes'
# neighbours), then some far ones: orjson must write each as JCS does.
TEXT = "".join(chr(code) for code in range(0x3000)) + "\ue000\uffff\U0001f600\U0010ffff\u2028\u2029\x7f"
DOCUMENTS = [
    {"seq": 1, "b": None, "a": [True, False, None, 0, -1, 2**53 - 1, -(2**53 - 1)], "text": TEXT},
    {"nested": {"z": {"y": [{"x": "\"quoted\" and \\ backslash"}]}, "A": "upper before lower"}, "": "empty key"},
    {"é": 1, "e": 2, "z": 3},  # a non-ASCII key: rfc8785 sorts it
    {"\U0001f600": 1, "\uff61": 2},  # UTF-16 order differs from code point order here
    {"float": 1.0, "small": 1e-7, "large": 1e21, "third": 1 / 3},  # ECMAScript's number forms
    [1, "two", {"three": 3}],
    "just text",
]


@pytest.mark.parametrize("document", DOCUMENTS, ids=range(len(DOCUMENTS)))
def test_canonical_json_is_rfc8785s(document):
    assert audit.canonical_json(document) == rfc8785.dumps(document)


def test_canonical_json_refuses_what_rfc8785_refuses():
    for document in ({"big": 2**53}, {"lone": "\ud800"}):
        with pytest.raises(rfc8785.CanonicalizationError):
            audit.canonical_json(document)


def _entry(action):
    """An entry as `audit.record` makes it, kept aside rather than in a session."""
    holder = SimpleNamespace(info={})
    audit.record(action, "thing", "1", after={"n": 1}, session=holder)
    (pending,) = holder.info.values()
    return pending


def test_an_append_rolled_back_leaves_the_next_on_the_head_the_database_holds(app):
    with app.app_context():
        keys.issue_key("0x" + "1" * 40)
        db.session.remove()
        with pytest.raises(RuntimeError), write_transaction() as session:
            audit.append(session, _entry("test.rolled_back"))  # this process now remembers a head not kept
            raise RuntimeError("the action fails after its entry was appended")
        db.session.remove()
        keys.issue_key("0x" + "2" * 40)
        db.session.remove()
    found = entries(app)
    assert "test.rolled_back" not in {entry["action"] for entry in found}
    assert [entry["seq"] for entry in found] == list(range(1, len(found) + 1))
    assert [entry["after"]["wallet"][2:4] for entry in entries(app, "key.issue")] == ["11", "22"]
    result = verified(app)
    assert result.finding is None and result.head_seq == len(found)


def test_two_apps_taking_turns_on_one_database_keep_one_chain(app, database_url):
    other = make_app(database_url)
    try:
        for number in range(6):
            writer = app if number % 2 == 0 else other  # each finds the head moved by the other since its last
            with writer.app_context():
                keys.issue_key(f"0x{number + 1:040x}")
                db.session.remove()
    finally:
        with other.app_context():
            db.engine.dispose()
    found = entries(app, "key.issue")
    assert [int(entry["after"]["wallet"], 16) for entry in found] == [1, 2, 3, 4, 5, 6]
    everything = entries(app)
    assert [entry["seq"] for entry in everything] == list(range(1, len(everything) + 1))
    for before, after in zip(everything, everything[1:], strict=False):
        assert after["prev_hash"] == before["hash"]
    assert verified(app).finding is None
