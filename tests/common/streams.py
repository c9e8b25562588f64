"""Many event streams of GET /changes held open at once on plain sockets, from one thread.

A thread or a session per stream would cost the client more than the server; a selector reads them
all. Used by tests/feed/test_live_feed_servers.py (a few hundred) and bench/streams.py (a thousand).
"""

import selectors
import socket
import time
from urllib.parse import urlsplit


class Streams:
    """`count` streams of `url` + /changes?feed=eventsource, the keys taken in turn from `keys`."""

    def __init__(self, url, keys, count, query="feed=eventsource&heartbeat=60000"):
        parts = urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.selector = selectors.DefaultSelector()
        self.sockets = []
        self.received = {}
        for number in range(count):
            sock = socket.create_connection(self.address, timeout=30)
            sock.sendall(
                f"GET /changes?{query} HTTP/1.1\r\nHost: {parts.netloc}\r\nx-api-key: {keys[number % len(keys)]}\r\n"
                "Accept: text/event-stream\r\n\r\n".encode()
            )
            sock.setblocking(False)
            self.sockets.append(sock)
            self.received[sock] = b""
            self.selector.register(sock, selectors.EVENT_READ)

    def wait_for(self, needle, timeout):
        """Read every stream until each has received `needle` (bytes) or has ended; {socket: monotonic
        time at which its `needle` arrived}, for those that received it within `timeout` seconds."""
        arrived = {sock: time.monotonic() for sock in self.sockets if needle in self.received[sock]}
        deadline = time.monotonic() + timeout
        waiting = {sock for sock in self.sockets if sock not in arrived}
        while waiting and time.monotonic() < deadline:
            for key, _ in self.selector.select(timeout=max(0.0, deadline - time.monotonic())):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self.selector.unregister(sock)
                    waiting.discard(sock)
                    continue
                self.received[sock] += data
                if sock in waiting and needle in self.received[sock]:
                    arrived[sock] = time.monotonic()
                    waiting.discard(sock)
        return arrived

    def statuses(self):
        """The status code of each stream's response, as far as it was read (None before its first line)."""
        return [int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/1.1 ") else None for data in self.received.values()]

    def close(self):
        for sock in self.sockets:
            try:
                self.selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            sock.close()
        self.selector.close()


def parse_events(text):
    """The events of an SSE body as dicts of their fields (comments left out), and the comments."""
    events, comments = [], []
    for block in text.split("\n\n"):
        fields = {}
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
            elif line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
        if fields:
            events.append(fields)
    return events, comments


def headers_of(key, **more):
    return {"x-api-key": key, **more}
