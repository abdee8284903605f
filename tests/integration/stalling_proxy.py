"""A TCP proxy on loopback in front of a real server that can stop passing bytes, both ways,
without closing a connection: what a frozen server, or a network that drops packets, looks like
to a client. The operating system still accepts connections and acknowledges what is sent, so
only the client's own deadline notices."""

from __future__ import annotations

import contextlib
import select
import socket
import threading


class StallingProxy:
    """Forwards connections on `port` to (`host`, `target_port`) until `stall`, again after
    `resume`; `close` ends every connection."""

    def __init__(self, host: str, target_port: int) -> None:
        self.target = (host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    def stall(self) -> None:
        """Stop passing bytes, from now on, on every connection (new ones included)."""
        self._flowing.clear()

    def resume(self) -> None:
        """Pass bytes again, what waited first."""
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                pump = threading.Thread(target=self._pump, args=(source, sink), daemon=True)
                self._threads.append(pump)
                pump.start()

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
