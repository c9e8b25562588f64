"""A test's HTTP peer on a free port of 127.0.0.1 (an upstream, a webhook receiver): a thread per request,
HTTP/1.1 (keep-alive, as the service's clients expect), no log lines, serving from the start of its `with`
block to its end."""

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Loopback:
    """Answers each request whose method `answers` names ({"GET": answer}) by calling answer(handler), with the
    request's BaseHTTPRequestHandler; any other method is answered 501, as http.server answers it."""

    def __init__(self, **answers):
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

        for method, answer in answers.items():
            setattr(Handler, f"do_{method}", lambda handler, answer=answer: answer(handler))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
