"""A tiny HTTP proxy that forwards every request to an S3 endpoint and records it: the
server-side count of what a client asks (``python/tests/test_s3.py`` puts it between blz and
moto to count the requests of an open and a small read from Python and from the ``blz``
command).

    with CountingProxy(os.environ["AWS_ENDPOINT_URL"]) as proxy:
        ...  # point AWS_ENDPOINT_URL at proxy.url
        proxy.requests  # [("GET", "/bucket/key", "bytes=0-99" or None), ...]
        proxy.bodies    # [("PUT", "/bucket/key", 1234), ...]: the bytes each request sent
"""

from __future__ import annotations

import http.client
import http.server
import threading
import urllib.parse

# Hop-by-hop headers, not forwarded either way (RFC 9110 §7.6.1), and the body's framing,
# which the proxy sets itself.
_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
}


class CountingProxy:
    """Forwards to ``upstream`` (``http://host:port``); ``requests`` lists what came in."""

    def __init__(self, upstream: str):
        u = urllib.parse.urlsplit(upstream)
        self.upstream = (u.hostname, u.port or 80)
        self.requests: list[tuple[str, str, str | None]] = []
        self.bodies: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _forward(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else None
                with proxy._lock:
                    proxy.requests.append((self.command, self.path, self.headers.get("Range")))
                    proxy.bodies.append((self.command, self.path, n))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=60)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    r = conn.getresponse()
                    data = r.read()
                    self.send_response(r.status, r.reason)
                    for k, v in r.getheaders():
                        if k.lower() not in _HOP:
                            self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def take(self) -> list[tuple[str, str, str | None]]:
        """The requests recorded so far, forgetting them."""
        with self._lock:
            got, self.requests = self.requests, []
            self.bodies = []
        return got

    def take_bodies(self) -> list[tuple[str, str, int]]:
        """The requests recorded so far with the bytes each sent, forgetting them."""
        with self._lock:
            got, self.bodies = self.bodies, []
            self.requests = []
        return got
