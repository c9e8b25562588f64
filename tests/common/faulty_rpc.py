"""A JSON-RPC endpoint that fails as real ones do, on a free loopback port: the path chooses how.

/slow sleeps past any timeout a test sets; /error answers HTTP 500; /redirect answers 302 to `target` (a real node,
whose answer must not be taken); /huge answers a valid result of over a megabyte; /notjson answers HTML; /rpcerror a
JSON-RPC error that is not a revert (-32005, a rate limit); /noresult an answer without a result; /revert and
/revert-32000 a revert, as nodes answer one (the wallet's no, not a fault).
"""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

SLOW_SECONDS = 3


class FaultyRpc:
    def __init__(self, target="http://127.0.0.1:9/"):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.calls += 1
                path = self.path.rstrip("/")
                if path == "/slow":
                    time.sleep(SLOW_SECONDS)
                    return self._send(200, _answer({"result": "0x" + "00" * 32}))
                if path == "/error":
                    return self._send(500, b"upstream failed")
                if path == "/redirect":
                    return self._send(302, b"", {"Location": target})
                if path == "/huge":
                    return self._send(200, _answer({"result": "0x1626ba7e" + "00" * (1024 * 1024)}))
                if path == "/notjson":
                    return self._send(200, b"<html>Bad gateway</html>", {"Content-Type": "text/html"})
                if path == "/rpcerror":
                    return self._send(200, _answer({"error": {"code": -32005, "message": "rate limit exceeded"}}))
                if path == "/revert":  # EIP-1474's code, as geth, anvil and reth answer a revert
                    return self._send(200, _answer({"error": {"code": 3, "message": "execution reverted: GS026",
                                                              "data": "0x08c379a0"}}))
                if path == "/revert-32000":  # as older nodes answer it
                    return self._send(200, _answer({"error": {"code": -32000, "message": "execution reverted"}}))
                if path == "/noresult":
                    return self._send(200, _answer({}))
                return self._send(404, b"no such fault")

            def _send(self, status, body, headers=None):
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        self.calls = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _answer(fields):
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, **fields})
