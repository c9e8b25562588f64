"""A TCP relay on loopback in front of the S3 store, that stops the store itself once `after` bytes of requests
have gone through it (in the middle of an upload's parts) and cuts every connection it carries: the client
meets a store that went away mid-upload, as when its machine stops."""

import socket
import threading

from tests.common.live import free_port


class CutOff:
    def __init__(self, upstream_port, after, on_cut):
        self.upstream_port, self.after, self.on_cut = upstream_port, after, on_cut
        self.port = free_port()
        self.sent = 0
        self.cut = threading.Event()
        self.lock = threading.Lock()
        self.sockets = []
        self.listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()

    def _pipe(self, source, target, counted):
        try:
            while block := source.recv(65536):
                target.sendall(block)
                if counted:
                    with self.lock:
                        self.sent += len(block)
                        due = self.sent >= self.after and not self.cut.is_set()
                        if due:
                            self.cut.set()
                    if due:
                        self.on_cut()
                        self._drop()
                        return
        except OSError:
            pass
        finally:
            for sock in (source, target):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _drop(self):
        with self.lock:
            sockets, self.sockets = self.sockets, []
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            except OSError:
                pass

    def close(self):
        self.listener.close()
        self._drop()
