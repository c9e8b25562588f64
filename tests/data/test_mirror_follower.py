"""The follower (identity.data.follower) against an upstream that lies: a real HTTP server answering GET
/changes in the contract's shape with tampered content, wrong ids and forged signatures. Nothing of them is
stored and each is counted; a position the upstream refuses pauses the mirror with a clear last_error."""


import pytest

from identity.core import content
from identity.data import mirrors
from tests.common.mirroring import LyingUpstream, doc, entry, forged, sign, stored, tampered, wait_for, wrong_id

UPSTREAM_KEY = "idsk_what-the-lying-upstream-is-sent"


@pytest.mark.parametrize("streams", [True, False], ids=["event-stream", "no-stream-long-polls"])
def test_nothing_that_does_not_verify_is_stored_and_each_lie_is_counted(app, following, streams):
    signed = doc(5)
    signed["creator_signature"] = sign(content.address(signed).content_id)
    lies = [entry(1, doc(1)), entry(2, tampered(2)), entry(3, wrong_id(3)), entry(4, forged(4)), entry(5, signed)]
    with LyingUpstream(lies, streams=streams) as upstream:
        with app.app_context():
            mirror = mirrors.register(upstream.url, UPSTREAM_KEY)
        following()
        found = wait_for(app, mirror.id, lambda s: s["position"] == 5)
        assert (found["applied"], found["rejected"], found["already_present"], found["lag_entries"]) == (2, 3, 0, 0)
        assert stored(app) == {doc(1)["identity_id"], signed["identity_id"]}
        asked = upstream.requests
    assert all(request["key"] == UPSTREAM_KEY and request["query"]["include_docs"] == "true" for request in asked)
    feeds = {request["query"].get("feed") for request in asked}
    assert feeds == ({"eventsource"} if streams else {"eventsource", "longpoll"})


def test_an_upstream_restored_behind_the_mirror_pauses_it_and_resuming_reads_it_again_from_the_start(app, following):
    with LyingUpstream([entry(1, doc(1)), entry(2, doc(2)), entry(3, doc(3))]) as upstream:
        with app.app_context():
            mirror = mirrors.register(upstream.url, UPSTREAM_KEY)
        following()
        wait_for(app, mirror.id, lambda s: s["position"] == 3)
        # Restored from a backup that held only the first entry; its feed refuses positions beyond its end.
        upstream.entries = [entry(1, doc(1))]
        upstream.status, upstream.refuse_after_start = 409, True
        paused = wait_for(app, mirror.id, lambda s: not s["active"])
        assert paused["position"] == 0 and "restored from an older backup" in paused["last_error"]
        assert "refused with 409" in paused["last_error"] and paused["last_error_at"] is not None
        upstream.status = None
        upstream.entries += [entry(2, doc(4))]
        with app.app_context():
            mirrors.update(mirror.id, {"active": True})
        resumed = wait_for(app, mirror.id, lambda s: s["position"] == 2)
        assert (resumed["applied"], resumed["already_present"], resumed["rejected"]) == (4, 1, 0)
        assert stored(app) == {doc(n)["identity_id"] for n in (1, 2, 3, 4)}


def test_an_upstream_that_refuses_the_key_is_last_error_and_the_mirror_keeps_trying(app, following):
    with LyingUpstream([entry(1, doc(1))]) as upstream:
        upstream.status = 401
        with app.app_context():
            mirror = mirrors.register(upstream.url, UPSTREAM_KEY)
        following()
        refused = wait_for(app, mirror.id, lambda s: s["last_error"] is not None)
        assert "refuses this mirror's key" in refused["last_error"] and refused["active"]
        assert UPSTREAM_KEY not in refused["last_error"]
        upstream.status = None
        assert wait_for(app, mirror.id, lambda s: s["position"] == 1)["applied"] == 1
