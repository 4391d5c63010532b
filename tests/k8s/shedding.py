"""A hub's API server shedding load, on demand: a TLS proxy in front of the real one.

API Priority and Fairness refuses a flow it sheds with `429 Too Many Requests` and
`Retry-After`, but only under real saturation, which a test cannot produce on cue. So this
proxy stands in front of a real kube-apiserver, with a serving certificate from that hub's
own CA (a client that trusts the hub trusts it), and either passes each connection through
byte for byte, watches included, or, while shedding, answers every request 429 as the API
server does, with `Retry-After: 1` and `Connection: close`, so that each later request comes
on a new connection and is answered the same way. Turning shedding on cuts the connections it
is passing through, so that no kept-alive connection slips past it.
"""

from __future__ import annotations

import json
import selectors
import socket
import ssl
import threading
from typing import Any

from kube import Hub, free_port

HEAD_LIMIT = 64 * 1024


class Shedding:
    """`with Shedding(hub) as proxy:` proxy.endpoint is the hub through the proxy;
    proxy.shed(True/False); proxy.refused counts the 429s it answered."""

    def __init__(self, hub: Hub, name: str = "shedding-proxy"):
        crt, key = hub.cp.pki.issue(name, name, ips=("127.0.0.1",))
        self.server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.server_ctx.load_cert_chain(str(crt), str(key))
        self.server_ctx.set_alpn_protocols(["http/1.1"])
        self.upstream_ctx = ssl.create_default_context(cafile=str(hub.cp.pki.ca_crt))
        self.upstream = ("127.0.0.1", hub.cp.port)
        self.port = free_port()
        self.endpoint = f"https://127.0.0.1:{self.port}"
        self.shedding = False
        self.refused = 0
        self.passed = 0
        self.lock = threading.Lock()
        self.open: set[socket.socket] = set()
        self.listener = socket.create_server(("127.0.0.1", self.port))
        self.stopped = threading.Event()

    def __enter__(self) -> "Shedding":
        threading.Thread(target=self._accept, name="shedding-accept", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped.set()
        self.listener.close()
        self._cut()

    def shed(self, on: bool) -> None:
        with self.lock:
            self.shedding = on
        if on:
            self._cut()

    def _cut(self) -> None:
        with self.lock:
            conns, self.open = list(self.open), set()
        for s in conns:
            # The socket's own shutdown, not the TLS layer's: its relay thread alone touches
            # the TLS state, sees the end, and closes both sides.
            try:
                socket.socket.shutdown(s, socket.SHUT_RDWR)
            except OSError:
                pass

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self.server_ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            raw.close()
            return
        head = b""
        try:
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                chunk = client.recv(4096)
                if not chunk:
                    client.close()
                    return
                head += chunk
        except OSError:
            client.close()
            return
        with self.lock:
            shedding = self.shedding
        if shedding:
            self._refuse(client)
            return
        try:
            upstream = self.upstream_ctx.wrap_socket(socket.create_connection(self.upstream, timeout=10),
                                                     server_hostname=self.upstream[0])
            upstream.settimeout(None)
            upstream.sendall(head)
        except OSError:
            client.close()
            return
        with self.lock:
            self.passed += 1
            self.open.update((client, upstream))
        self._relay(client, upstream)

    def _refuse(self, client: socket.socket) -> None:
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 429,
                           "reason": "TooManyRequests",
                           "message": "Too many requests, please try again later."}).encode()
        answer = (b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        try:
            client.sendall(answer)
        except OSError:
            pass
        with self.lock:
            self.refused += 1
        client.close()

    def _relay(self, client: ssl.SSLSocket, upstream: ssl.SSLSocket) -> None:
        """Both directions in this one thread (a TLS connection is not for two threads at once),
        until either side ends."""
        sel = selectors.DefaultSelector()
        for src, dst in ((client, upstream), (upstream, client)):
            src.setblocking(False)
            sel.register(src, selectors.EVENT_READ, dst)
        try:
            while not self.stopped.is_set():
                for key, _ in sel.select(timeout=1):
                    src, dst = key.fileobj, key.data
                    while True:  # what TLS has buffered too, which select does not see
                        try:
                            data = src.recv(65536)
                        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                            break
                        if not data:
                            return
                        dst.setblocking(True)
                        dst.sendall(data)
                        dst.setblocking(False)
        except (OSError, ValueError):
            pass
        finally:
            sel.close()
            for s in (client, upstream):
                s.close()
            with self.lock:
                self.open.discard(client)
                self.open.discard(upstream)
