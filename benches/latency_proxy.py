"""A TCP proxy in front of an S3 endpoint that adds a fixed delay to every HTTP request, and
counts the requests it forwards (benches/compare_s3.py puts it between the clients and a
local S3 server to model a remote one).

    with LatencyProxy("http://127.0.0.1:9000", delay_ms=20) as proxy:
        ...  # point the clients at proxy.url
        proxy.take()  # [Request(method, path, range, body_bytes, t), ...] since the last take

Bytes are copied as they come, both ways, one thread per direction of each connection. The
client-to-server direction is parsed just enough to find where each HTTP/1.1 request starts
(request line and headers, then a body framed by Content-Length or chunked encoding): when
the first bytes of a new request arrive, on a fresh connection or a kept-alive one, they are
held for delay_ms before being forwarded. Each request thus waits delay_ms once, as if the
server were delay_ms further away (one round trip's worth, paid on the way in); connections
wait independently of each other, so concurrent requests overlap their delays as they would
over a network. Pipelined requests (none of the clients here pipeline) would be delayed one
after another. The server-to-client direction is not parsed.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.parse
from typing import NamedTuple

BUF = 1 << 20


class Request(NamedTuple):
    method: str
    path: str
    range: str | None
    body_bytes: int
    # time.perf_counter() when the request's head had arrived (before its delay)
    t: float = 0.0


class _RequestParser:
    """Finds the starts of the requests in a client's byte stream. feed(data) returns the
    offsets in data at which a new request begins, and records each request's head."""

    def __init__(self, on_request):
        self.on_request = on_request
        self.state = "start"  # start, head, body, chunk-size, chunk-data, trailer
        self.head = bytearray()
        self.left = 0  # body bytes (or chunk bytes with their CRLF) still to come
        self.line = bytearray()
        self.pending = None  # the request whose body is being read: (method, path, range, t)
        self.body = 0

    def _finish(self):
        method, path, rng, t = self.pending
        self.on_request(Request(method, path, rng, self.body, t))
        self.pending = None
        self.state = "start"

    def feed(self, data: bytes) -> list[int]:
        starts = []
        i, n = 0, len(data)
        while i < n:
            if self.state == "start":
                starts.append(i)
                self.state = "head"
                self.head.clear()
            if self.state == "head":
                # The head ends at the first blank line; it may arrive split.
                before = len(self.head)
                self.head += data[i:]
                end = self.head.find(b"\r\n\r\n", max(0, before - 3))
                if end < 0:
                    return starts
                used = end + 4 - before
                i += used
                del self.head[end + 4 :]
                self._parse_head(bytes(self.head))
                continue
            if self.state == "body":
                take = min(self.left, n - i)
                i += take
                self.left -= take
                self.body += take
                if self.left == 0:
                    self._finish()
                continue
            if self.state in ("chunk-size", "trailer"):
                j = data.find(b"\n", i)
                if j < 0:
                    self.line += data[i:]
                    return starts
                self.line += data[i : j + 1]
                i = j + 1
                line = bytes(self.line).strip()
                self.line.clear()
                if self.state == "trailer":
                    if not line:
                        self._finish()
                    continue
                size = int(line.split(b";")[0], 16)
                if size == 0:
                    self.state = "trailer"
                else:
                    self.state = "chunk-data"
                    self.left = size + 2  # the data and its CRLF
                    self.body += size
                continue
            if self.state == "chunk-data":
                take = min(self.left, n - i)
                i += take
                self.left -= take
                if self.left == 0:
                    self.state = "chunk-size"
                continue
        return starts

    def _parse_head(self, head: bytes):
        lines = head.decode("latin-1").split("\r\n")
        method, path = (lines[0].split(" ") + ["", ""])[:2]
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        self.pending = (method, path, headers.get("range"), time.perf_counter())
        self.body = 0
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = "chunk-size"
        elif int(headers.get("content-length", "0") or 0) > 0:
            self.state = "body"
            self.left = int(headers["content-length"])
        else:
            self._finish()


class LatencyProxy:
    """Listens on 127.0.0.1 (url), forwards to upstream (http://host:port), holding each
    request delay_ms before forwarding it; requests lists what was forwarded."""

    def __init__(self, upstream: str, delay_ms: float = 0.0):
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname, u.port or 80)
        self.delay = delay_ms / 1000.0
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=256)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._closing = False
        self._conns: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> LatencyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing = True
        try:
            # Wakes accept(): connect once, then close the listener.
            socket.create_connection(self._listener.getsockname(), timeout=1).close()
        except OSError:
            pass
        self._listener.close()
        self._thread.join(timeout=5)
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            try:
                s.close()
            except OSError:
                pass

    def take(self) -> list[Request]:
        """The requests forwarded so far, forgetting them."""
        with self._lock:
            got, self.requests = self.requests, []
        return got

    def _record(self, req: Request):
        with self._lock:
            self.requests.append(req)

    def _accept(self):
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._closing:
                client.close()
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._conns.update((client, server))
            threading.Thread(target=self._up, args=(client, server), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client), daemon=True).start()

    def _close(self, *socks):
        with self._lock:
            for s in socks:
                self._conns.discard(s)
        for s in socks:
            try:
                s.close()
            except OSError:
                pass

    def _up(self, client: socket.socket, server: socket.socket):
        """Client to server: each request held delay seconds before its first byte goes on."""
        parser = _RequestParser(self._record)
        try:
            while True:
                data = client.recv(BUF)
                if not data:
                    break
                starts = parser.feed(data)
                if not starts or not self.delay:
                    server.sendall(data)
                    continue
                prev = 0
                for s in starts:
                    if s > prev:
                        server.sendall(data[prev:s])
                    time.sleep(self.delay)
                    prev = s
                server.sendall(data[prev:])
        except OSError:
            pass
        finally:
            try:
                server.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def _down(self, server: socket.socket, client: socket.socket):
        try:
            while True:
                data = server.recv(BUF)
                if not data:
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            self._close(client, server)
