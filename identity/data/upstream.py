"""An upstream's change feed as a mirror reads it (identity.data.follower): GET <url>/changes with
include_docs=true, as an event stream resumed with Last-Event-ID, or as long polls where a proxy cuts
streams. Each answer is checked for the contract's shape before any entry of it is used; whatever goes
wrong is an UpstreamError whose message says what, and what to do. The key goes in the x-api-key
header of each request and in nothing else: no message, no log line.
"""

import re
from urllib.parse import urlencode, urlsplit

import ijson
import orjson
import urllib3

# Entries the upstream reads at once: the largest page the feed gives.
PAGE = 1000
# The stream's comment every HEARTBEAT_MS milliseconds proves it alive; three missed, it is taken for dead.
HEARTBEAT_MS = 10_000
LONGPOLL_MS = 30_000
CONNECT_SECONDS = 10.0
# What is read of a problem's body; the most one long-poll page may hold (a page of 1,000 identities is
# about 1.5 MB); the most one entry may hold, whether an event of the stream (all its lines) or an entry of
# a page (the largest identity a create allows is well under it). Past any of them the answer is an
# UpstreamError, read no further: an upstream cannot make a mirror hold more.
MAX_PROBLEM_BYTES = 64 * 1024
MAX_ANSWER_BYTES = 64 * 1024 * 1024
MAX_EVENT_BYTES = 1024 * 1024
# What one read of a stream or of a page takes at most.
READ_BYTES = 256 * 1024
USER_AGENT = "identity-service-mirror/1"
FEED_HEAD = "Feed-Head"
# The contract's largest seq: what every JSON parser reads exactly.
MAX_SEQ = 2**53 - 1
EVENT_STREAM = "text/event-stream"
# Upstream text that reaches a log line or last_error: printable, short.
_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


class UpstreamError(Exception):
    """The upstream did not answer as the contract says; the message says what, and what to do.

    `refused`: an answer that retrying will not change (a 4xx other than 401, 403, 408 and 429): the
    mirror needs an operator. `beyond_end`: the upstream serves its feed from the start but refuses this
    mirror's position, as after a restore from an older backup. `retry_after`: seconds the upstream asked
    to wait (429, 503). `no_stream`: the event stream was answered by something else than a stream (a
    proxy's doing): long polls are the way.
    """

    def __init__(self, message, refused=False, beyond_end=False, retry_after=None, no_stream=False):
        super().__init__(message)
        self.refused = refused
        self.beyond_end = beyond_end
        self.retry_after = retry_after
        self.no_stream = no_stream


def printable(text, limit=300):
    """Text from the upstream as a log line or last_error may carry it."""
    return _UNPRINTABLE.sub("?", str(text))[:limit]


def _problem_detail(response):
    try:
        body = orjson.loads(response.read(MAX_PROBLEM_BYTES))
        detail = body.get("detail") if isinstance(body, dict) else None
    except (orjson.JSONDecodeError, urllib3.exceptions.HTTPError, OSError):
        detail = None
    return printable(detail) if isinstance(detail, str) and detail else "no detail"


def _retry_after(response):
    try:
        return max(0.0, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def checked_entry(entry):
    """`entry` if it is an entry at all (an object with a seq, 1 to 2^53 - 1); the mirror checks the rest of
    it, and rejects it alone. Raises UpstreamError: without a seq nothing can be skipped in order."""
    if not isinstance(entry, dict) or type(entry.get("seq")) is not int or not 1 <= entry["seq"] <= MAX_SEQ:
        raise UpstreamError("The upstream's answer is not the contract's shape: an entry of its feed has no "
                            "seq from 1 to 2^53 - 1. Is the URL an Identity service's?")
    return entry


def raw_entry(data):
    """(seq, data) for an entry's JSON text `data` once it is checked to have a seq (checked_entry): the
    entry travels to the applier as the bytes the upstream sent, which bound what it holds, and is
    read again there."""
    return checked_entry(_json(data))["seq"], bytes(data)


class EventParser:
    """Server-Sent Events, as bytes arrive: what `feed` completes, as (event type, data) pairs.

    What it holds between reads, `held` bytes, is the unfinished event (its data lines so far and its
    unfinished line): past MAX_EVENT_BYTES, an UpstreamError, whether one line never ends or the blank
    line that ends the event never comes.
    """

    def __init__(self):
        self.partial = b""
        self.data = []
        self.data_bytes = 0
        self.type = None

    @property
    def held(self):
        return len(self.partial) + self.data_bytes

    def feed(self, chunk):
        lines = (self.partial + chunk).split(b"\n")
        self.partial = lines.pop()
        events = []
        for line in lines:
            line = line.removesuffix(b"\r")
            if not line:
                if self.data:
                    events.append((self.type or "message", b"\n".join(self.data)))
                self.data, self.data_bytes, self.type = [], 0, None
            elif line.startswith(b":"):
                events.append(("comment", line))
            else:
                name, _, value = line.partition(b":")
                value = value.removeprefix(b" ")
                if name == b"data":
                    self.data.append(value)
                    self.data_bytes += len(value) + 1
                    self._bound()
                elif name == b"event":
                    self.type = value.decode("utf-8", "replace")
        self._bound()
        return events

    def _bound(self):
        if self.held > MAX_EVENT_BYTES:
            raise UpstreamError(f"The upstream's stream sent an event of over {MAX_EVENT_BYTES} bytes (its lines, or "
                                "one line, without the blank line that ends it); not the contract's shape. Trying "
                                "again later; if it goes on, the upstream needs fixing.")


class Upstream:
    """One upstream's feed, read with its key: a stream (events) or long polls (longpoll)."""

    def __init__(self, url, key):
        parts = urlsplit(url)
        self.base = url
        self.path = parts.path.rstrip("/") + "/changes"
        self.headers = {"x-api-key": key, "User-Agent": USER_AGENT}
        self.pool = urllib3.connection_from_url(url, maxsize=1, retries=False, block=False)
        self.response = None

    def close(self):
        """End what is under way, from any thread: an open stream's read returns at once."""
        response = self.response
        if response is not None:
            try:
                response.shutdown()
            except (ValueError, RuntimeError, OSError):  # already closed, or back in its pool
                pass
        self.pool.close()

    def _get(self, query, headers=None, read_seconds=30.0):
        target = f"{self.path}?{urlencode(query)}"
        try:
            response = self.pool.urlopen(
                "GET", target, headers={**self.headers, **(headers or {})}, redirect=False, retries=False,
                preload_content=False, timeout=urllib3.Timeout(connect=CONNECT_SECONDS, read=read_seconds),
            )
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as error:
            raise UpstreamError(f"The upstream at {self.base} did not answer: {describe(error)}.") from None
        self.response = response
        if response.status != 200:
            self._refuse(response, query)
        return response

    def _refuse(self, response, query):
        status, detail = response.status, _problem_detail(response)
        response.release_conn()
        where = f"The upstream at {self.base} answered {status} to GET {self.path} ({detail})"
        if status == 401:
            raise UpstreamError(f"{where}: it refuses this mirror's key, unknown, revoked or expired there. Issue "
                                'a key on the upstream (read scope is enough) and give it: PATCH /mirrors/<id> {"key": ...}.')
        if status == 403:
            raise UpstreamError(f"{where}: the key may not read its feed; give a key that may.")
        if status in (408, 429) or status >= 500:
            raise UpstreamError(f"{where}; trying again later.", retry_after=_retry_after(response))
        if 300 <= status < 400:
            raise UpstreamError(f"{where}, a redirect, not followed: register the URL it names.", refused=True)
        if query.get("after", 0) and self._serves_from_start():
            raise UpstreamError(
                f"{where}: it serves its feed from the start but not after this mirror's position, {query['after']}, "
                "as when it was restored from an older backup. The mirror is paused; resumed, it reads the "
                "upstream's feed again from its start (identities here stay; those found again are counted as "
                "already present).", refused=True, beyond_end=True)
        raise UpstreamError(f"{where}: the mirror is paused until an operator fixes the cause and resumes it.",
                            refused=True)

    def _serves_from_start(self):
        try:
            response = self.pool.urlopen("GET", f"{self.path}?{urlencode({'after': 0, 'limit': 1})}",
                                         headers=self.headers, redirect=False, retries=False,
                                         timeout=urllib3.Timeout(connect=CONNECT_SECONDS, read=30.0))
        except (urllib3.exceptions.HTTPError, OSError, ValueError):
            return False
        return response.status == 200

    def events(self, after):
        """The stream after `after`: yields (entries, head, heartbeats) as it brings them (entries as
        raw_entry gives them, each at most MAX_EVENT_BYTES): first ([], the
        Feed-Head the upstream sent, 0), then what each read brought, the number of heartbeats included
        (the upstream's comment lines but the first). Ends when the upstream ends the stream; raises
        UpstreamError."""
        response = self._get(
            {"feed": "eventsource", "include_docs": "true", "limit": PAGE, "heartbeat": HEARTBEAT_MS, "after": after},
            {"Accept": EVENT_STREAM, "Last-Event-ID": str(after)}, read_seconds=3 * HEARTBEAT_MS / 1000,
        )
        try:
            if not response.headers.get("Content-Type", "").startswith(EVENT_STREAM):
                raise UpstreamError(f"The upstream at {self.base} answered the event stream with "
                                    f"{printable(response.headers.get('Content-Type'))}, not {EVENT_STREAM} (a proxy?)",
                                    no_stream=True)
            yield [], _head(response), 0
            parser, comments = EventParser(), 0
            while chunk := response.read1(READ_BYTES):
                events = parser.feed(chunk)
                entries = [raw_entry(data) for kind, data in events if kind == "change"]
                beats = sum(1 for kind, _ in events if kind == "comment")
                yield entries, None, max(0, beats - (comments == 0))
                comments += beats
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise UpstreamError(f"The upstream's stream broke: {describe(error)}.") from None
        finally:
            response.release_conn()

    def longpoll(self, after):
        """One long poll after `after`, waiting up to LONGPOLL_MS for a first entry; raises UpstreamError when
        it is refused. Returns an iterator of its page: ([], head), then the entries (as raw_entry gives them)
        as they arrive, a read at a time. The page is read entry by entry, never whole: more entries than asked
        for (PAGE), an entry over MAX_EVENT_BYTES or a page over MAX_ANSWER_BYTES is an UpstreamError there,
        and nothing more of it is read."""
        response = self._get(
            {"feed": "longpoll", "include_docs": "true", "limit": PAGE, "after": after, "timeout": LONGPOLL_MS},
            read_seconds=LONGPOLL_MS / 1000 + 30,
        )
        return self._page(response)

    @staticmethod
    def _page(response):
        try:
            yield [], _head(response)
            yield from _page_entries(_Counted(response))
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise UpstreamError(f"The upstream's answer broke off: {describe(error)}.") from None
        except ijson.JSONError:
            raise UpstreamError("The upstream's answer is not JSON; not the contract's shape.") from None
        finally:
            response.release_conn()


class _Counted:
    """A response read through ijson, counting what it gives: past MAX_ANSWER_BYTES, an UpstreamError."""

    def __init__(self, response):
        self.response = response
        self.count = 0

    def read(self, size=READ_BYTES):
        chunk = self.response.read(min(size, READ_BYTES))
        self.count += len(chunk)
        if self.count > MAX_ANSWER_BYTES:
            raise UpstreamError(f"The upstream's page is larger than {MAX_ANSWER_BYTES} bytes; not the contract's "
                                "shape. Trying again later; if it goes on, the upstream needs fixing.")
        return chunk


def _page_entries(reader):
    """The entries of a page, {"data": [entry, ...], ...}, read from `reader` (_Counted) as it arrives: each
    built alone from the parser's events (ijson), and yielded in lists, one per read, with None for the head."""
    entries, count, builder, depth, started, found, read = [], 0, None, 0, 0, False, 0
    for prefix, event, value in ijson.parse(reader, buf_size=READ_BYTES, use_float=True):
        if reader.count != read and entries:
            yield entries, None
            entries = []
        read = reader.count
        if builder is None:
            if prefix == "data" and event == "start_array":
                found = True
            elif prefix == "data" and event != "end_array":
                break  # data is not a list
            elif prefix == "data.item":
                if count == PAGE:
                    raise UpstreamError(f"The upstream's page holds more entries than the {PAGE} asked for; not the "
                                        "contract's shape. Trying again later; if it goes on, the upstream needs fixing.")
                builder, depth, started = ijson.ObjectBuilder(), 0, reader.count
        if builder is None:
            continue
        builder.event(event, value)
        depth += (event in ("start_map", "start_array")) - (event in ("end_map", "end_array"))
        if reader.count - started > MAX_EVENT_BYTES + READ_BYTES:
            raise UpstreamError(f"The upstream's page holds an entry of over {MAX_EVENT_BYTES} bytes; not the contract's "
                                "shape. Trying again later; if it goes on, the upstream needs fixing.")
        if depth == 0:
            entry, builder, count = checked_entry(builder.value), None, count + 1
            try:
                entries.append((entry["seq"], orjson.dumps(entry)))
            except orjson.JSONEncodeError:  # an integer beyond 64 bits: kept as its seq alone, then rejected
                entries.append((entry["seq"], orjson.dumps({"seq": entry["seq"]})))
    if not found:
        raise UpstreamError("The upstream's answer is not the contract's shape: no list of entries under data.")
    if entries:
        yield entries, None


def _json(data):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise UpstreamError("The upstream sent an entry that is not JSON; not the contract's shape.") from None


def _head(response):
    value = response.headers.get(FEED_HEAD, "")
    return int(value) if value.isdigit() and len(value) <= 16 and int(value) <= MAX_SEQ else None


def describe(error):
    """A short phrase for a failed request."""
    reason = getattr(error, "reason", None) or error
    if isinstance(reason, urllib3.exceptions.NewConnectionError):
        return "could not connect: " + printable(str(reason).rsplit(":", 1)[-1].strip())
    if isinstance(reason, urllib3.exceptions.TimeoutError):
        return "no answer in time"
    return printable(f"{type(reason).__name__}: {reason}")
