"""A TCP proxy on loopback in front of a real server that can stop passing bytes, both ways,
without closing a connection: what a frozen server, or a network that drops packets, looks like
to a client. The operating system still accepts connections and acknowledges what is sent, so
only the client's own deadline notices. It can also go down: every connection is closed and new
ones are refused, as when the server stops or its host is unreachable."""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable


class StallingProxy:
    """Forwards connections on `port` to (`host`, `target_port`) until `stall`, again after
    `resume`; `cut` takes it down until `restore`; `close` ends every connection."""

    def __init__(self, host: str, target_port: int) -> None:
        self.target = (host, target_port)
        self._listener = self._listen(0)
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._down = False
        self._sockets: list[socket.socket] = []
        self._threads = [self._start(self._accept, self._listener)]

    @staticmethod
    def _listen(port: int) -> socket.socket:
        # create_server sets SO_REUSEADDR, so `restore` can take the port back at once.
        listener = socket.create_server(("127.0.0.1", port))
        listener.settimeout(0.05)
        return listener

    @staticmethod
    def _start(target: Callable[..., None], *args: object) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        thread.start()
        return thread

    def stall(self) -> None:
        """Stop passing bytes, from now on, on every connection (new ones included)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Pass bytes again, what waited first."""
        self._flowing.set()

    def cut(self) -> None:
        """Go down: close every connection and stop listening, so a client's next connection
        is refused (the server is down, as far as the client can tell)."""
        self._down = True
        self._listener.close()
        self._close_connections()

    def restore(self) -> None:
        """Come back up on the same port after `cut` (nothing to do when up)."""
        if self._down:
            self._down = False
            self._listener = self._listen(self.port)
            self._threads.append(self._start(self._accept, self._listener))

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        self._close_connections()
        for thread in self._threads:
            thread.join(timeout=5)

    def _close_connections(self) -> None:
        sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                self._threads.append(self._start(self._pump, source, sink))

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        while not self._closed.is_set():
            self._flowing.wait()
            try:
                ready, _, _ = select.select([source], [], [], 0.05)
                if not ready or not self._flowing.is_set():
                    continue
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
            except (OSError, ValueError):  # ValueError: select on a socket `close` closed
                break
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
