"""A JSON-over-HTTP server on 127.0.0.1, in a thread, for the tests of HTTP clients.

Each POST is recorded (path, headers, JSON body) in :attr:`LocalServer.requests` and
answered by the ``answer`` callable given to it: ``answer(body) -> (status, headers, raw
bytes)``, called outside :attr:`LocalServer.lock` (take it to pick an answer from shared
state). Nothing leaves the machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[[Any], tuple[int, dict[str, str], bytes]]


class LocalServer:
    """Serves ``answer`` on 127.0.0.1 at :attr:`url` until :meth:`close`."""

    def __init__(self, answer: Answer) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                with server.lock:
                    server.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body}
                    )
                # outside the lock: an answer may take its time (a stalled server)
                status, headers, raw = answer(body)
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and went away

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
