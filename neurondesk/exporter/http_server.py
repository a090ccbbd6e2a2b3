"""The endpoint's HTTP server: prometheus_client's WSGI app (its content negotiation, OpenMetrics or the
text format) in a thread-per-connection server whose connections are bounded (issue 53 item 14).

prometheus_client's own ``start_http_server`` keeps a thread and a descriptor for as long as a client
holds its connection: a local user opening connections that send nothing held 210 of each in 25 s. Here
every read and write on a connection waits IO_TIMEOUT_S at most, a connection lasts CONNECTION_LIMIT_S
at most, and at most MAX_CONNECTIONS are open: a new one beyond that closes the oldest (a scrape is
answered in milliseconds; the oldest is the one holding a slot), so a normal scrape is still answered
while slow clients keep connecting. Each connection cut early is counted (``cut``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections import OrderedDict
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

MAX_CONNECTIONS = 32
IO_TIMEOUT_S = 10.0  # each read or write on a connection
CONNECTION_LIMIT_S = 30.0  # a whole connection, however it dribbles


class _Handler(WSGIRequestHandler):
    timeout = IO_TIMEOUT_S  # StreamRequestHandler.setup sets it on the connection

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        """Nothing of a scrape is logged (the workload's streams are the user's)."""


class BoundedServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    max_connections = MAX_CONNECTIONS
    connection_limit_s = CONNECTION_LIMIT_S

    def __init__(self, *args, **kwargs) -> None:
        self._open: OrderedDict[socket.socket, float] = OrderedDict()  # connection -> when it was accepted
        self._lock = threading.Lock()
        self.cut = 0  # connections closed early: over the cap or over their time
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            while len(self._open) >= self.max_connections:
                oldest, _ = self._open.popitem(last=False)
                self._cut(oldest)
            self._open[request] = now
        super().process_request(request, client_address)

    def shutdown_request(self, request) -> None:
        """The connection's thread ended (or it was never started): its slot is free."""
        with self._lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def service_actions(self) -> None:
        """serve_forever's loop, every poll interval: connections past their time are cut."""
        with self._lock:
            self._expire(time.monotonic())

    def _expire(self, now: float) -> None:
        while self._open:
            sock, started = next(iter(self._open.items()))
            if now - started < self.connection_limit_s:
                return
            del self._open[sock]
            self._cut(sock)

    def _cut(self, sock: socket.socket) -> None:
        """Its thread's read or write ends at once; the thread then closes it (shutdown_request)."""
        self.cut += 1
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(host: str, port: int, app) -> tuple[BoundedServer, threading.Thread]:
    """The server bound to ``host:port`` (OSError when taken), serving ``app`` on a daemon thread."""
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    server_class = type("BoundedServer", (BoundedServer,), {"address_family": family})
    server = make_server(host, port, app, server_class, handler_class=_Handler)
    thread = threading.Thread(target=server.serve_forever, name="neurondesk-metrics", daemon=True)
    thread.start()
    return server, thread
