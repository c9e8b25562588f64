"""An upstream that attacks its mirror: a small HTTP server on 127.0.0.1 that answers GET /changes as a
hostile instance would, to test what a mirror holds and writes whatever it is sent.

- `endless_event`: the event stream sends `data:` lines for ever, never the blank line that ends an event;
- `oversized_page`: a long poll answers a page of `page_entries` entries (far more than the 1,000 asked
  for), each `entry_bytes` long, made as it is sent, so the server holds none of it;
- otherwise it serves `entries` as they are given (poison, out of order), by stream or long poll.

`status` (with `retry_after`) is answered instead while set. `sent` counts the bytes of the answers' bodies
that the mirror took (what the socket accepted), `requests` each request's query and x-api-key. Each
answer stops at `cap` bytes, so a test ends even against a mirror that reads without bound.
"""

import json
import threading
from urllib.parse import parse_qs, urlsplit

from tests.common.loopback import Loopback

CAP = 256 * 1024 * 1024


class HostileUpstream(Loopback):
    def __init__(self, entries=(), endless_event=False, oversized_page=False, streams=True, page_entries=1_000_000,
                 entry_bytes=120, cap=CAP):
        self.entries = list(entries)
        self.endless_event = endless_event
        self.oversized_page = oversized_page
        self.streams = streams
        self.page_entries = page_entries
        self.entry_bytes = entry_bytes
        self.cap = cap
        self.status = None
        self.retry_after = None
        self.sent = 0
        self.requests = []
        self.lock = threading.Lock()
        super().__init__(GET=self.answer_until_hung_up)

    def answer_until_hung_up(self, handler):
        try:
            self.answer(handler)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the mirror hung up: what it does against a hostile answer

    def answer(self, handler):
        parts = urlsplit(handler.path)
        query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
        self.requests.append({"query": query, "key": handler.headers.get("x-api-key")})
        after = int(handler.headers.get("Last-Event-ID") or query.get("after") or 0)
        if self.status is not None:
            body = json.dumps({"type": "about:blank", "title": "Refused", "status": self.status,
                               "detail": f"refused with {self.status}"}).encode()
            headers = {"Retry-After": str(self.retry_after)} if self.retry_after else {}
            return self._send(handler, self.status, "application/problem+json", [body], len(body), headers)
        streaming = query.get("feed") == "eventsource" and self.streams
        if streaming and self.endless_event:
            line = b"data: " + b"x" * 4090 + b"\n"
            return self._send(handler, 200, "text/event-stream", self._repeat(b": ok\nevent: change\n", line), None)
        if self.oversized_page and not streaming:
            return self._send(handler, 200, "application/json", self._page(), None, {"Feed-Head": "1"})
        entries = self._after(after)
        head = max((entry["seq"] for entry in self.entries), default=0)
        if streaming:
            body = ": ok\n" + "".join(f"id: {e['seq']}\nevent: change\ndata: {json.dumps(e)}\n\n" for e in entries)
            return self._send(handler, 200, "text/event-stream", [body.encode()], None, {"Feed-Head": str(head)})
        page = json.dumps({"data": entries[:1000], "next_after": after}).encode()
        return self._send(handler, 200, "application/json", [page], len(page), {"Feed-Head": str(head)})

    def _after(self, after):
        """The entries as given, from the first one after those the mirror has (all of them up to `after`)."""
        start, highest = 0, 0
        for index, entry in enumerate(self.entries):
            highest = max(highest, entry["seq"])
            if highest > after:
                break
            start = index + 1
        return self.entries[start:]

    @staticmethod
    def _repeat(first, chunk):
        yield first
        while True:
            yield chunk

    def _page(self):
        """{"data": [page_entries entries]}, made as it is sent: small entries a thousand at a time (made once,
        sent again and again), large ones one at a time (the same bytes each time)."""
        pad = "p" * max(0, self.entry_bytes - 40)
        if self.entry_bytes < 64 * 1024:
            group = ",".join(json.dumps({"seq": n, "pad": pad}) for n in range(1, 1001)).encode()
            count = self.page_entries // 1000
        else:
            group, count = json.dumps({"seq": 1, "pad": pad}).encode(), self.page_entries
        yield b'{"data": [' + group
        for _ in range(count - 1):
            yield b"," + group
        yield b'], "next_after": 1}'

    def _send(self, handler, status, content_type, chunks, length, headers=None):
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        if length is not None:
            handler.send_header("Content-Length", str(length))
        else:
            handler.send_header("Connection", "close")
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        sent = 0
        for chunk in chunks:
            handler.wfile.write(chunk)
            handler.wfile.flush()
            sent += len(chunk)
            with self.lock:
                self.sent += len(chunk)
            if sent >= self.cap:
                break
        if length is None:
            handler.close_connection = True
