"""How a mirror reads its upstream's feed (identity.data.upstream): Server-Sent Events as bytes arrive, entries
checked for a seq before anything else, and every refusal an UpstreamError that says what to do."""

import pytest

from identity.data.upstream import EventParser, Upstream, UpstreamError, checked_entry
from tests.common.mirroring import LyingUpstream, doc, entry

KEY = "idsk_the-key-no-message-repeats"


def test_events_are_parsed_across_reads_whatever_the_line_endings():
    parser = EventParser()
    stream = b': ok\nid: 1\nevent: change\ndata: {"seq": 1}\n\n: heartbeat\r\nid: 2\r\nevent: change\r\ndata: {"se'
    assert parser.feed(stream[:20]) == [("comment", b": ok")]
    assert parser.feed(stream[20:]) == [("change", b'{"seq": 1}'), ("comment", b": heartbeat")]
    assert parser.feed(b'q": 2}\r\n\r\ndata: a\ndata: b\n\n') == [("change", b'{"seq": 2}'), ("message", b"a\nb")]


@pytest.mark.parametrize("found", [[], "1", {"seq": "1"}, {"seq": True}, {"seq": 0}, {"seq": 2**53}, {"id": 4}])
def test_an_entry_without_a_seq_of_the_contract_is_an_error_of_the_answer(found):
    with pytest.raises(UpstreamError, match="not the contract's shape"):
        checked_entry(found)


def test_a_stream_brings_the_feed_head_then_the_entries():
    with LyingUpstream([entry(1, doc(1)), entry(2, doc(2))]) as upstream:
        reads = list(Upstream(upstream.url, KEY).events(0))
    assert reads[0] == ([], 2, 0)
    assert [seq for entries, _, _ in reads[1:] for seq, _ in entries] == [1, 2]
    assert upstream.requests[0]["key"] == KEY


@pytest.mark.parametrize("status, refused, words", [
    (401, False, "refuses this mirror's key"),
    (403, False, "may not read its feed"),
    (503, False, "trying again later"),
    (404, True, "paused until an operator"),
    (301, True, "a redirect, not followed"),
])
def test_each_refusal_says_what_it_was_and_whether_retrying_helps(status, refused, words):
    with LyingUpstream([entry(1, doc(1))]) as upstream:
        upstream.status = status
        with pytest.raises(UpstreamError) as raised:
            Upstream(upstream.url, KEY).longpoll(0)
    assert raised.value.refused is refused and words in str(raised.value)
    assert f"answered {status}" in str(raised.value) and KEY not in str(raised.value)


def test_a_position_refused_by_an_upstream_that_serves_its_start_is_beyond_its_end():
    with LyingUpstream([entry(1, doc(1))]) as upstream:
        upstream.status, upstream.refuse_after_start = 409, True
        with pytest.raises(UpstreamError) as raised:
            Upstream(upstream.url, KEY).longpoll(5)
    assert raised.value.refused and raised.value.beyond_end
    assert "restored from an older backup" in str(raised.value)


def test_an_event_stream_answered_by_a_page_says_streams_do_not_get_through():
    with LyingUpstream([entry(1, doc(1))], streams=False) as upstream:
        with pytest.raises(UpstreamError) as raised:
            list(Upstream(upstream.url, KEY).events(0))
    assert raised.value.no_stream and not raised.value.refused


def test_an_upstream_that_does_not_answer_is_a_retried_error():
    with pytest.raises(UpstreamError, match="did not answer: could not connect") as raised:
        Upstream("http://127.0.0.1:9", KEY).longpoll(0)
    assert not raised.value.refused
