"""A loopback HTTP proxy for tests: CONNECT tunnels and absolute-form forwarding, counting what it relays."""

from __future__ import annotations

import select
import socket
import threading


class LoopbackProxy:
    """An HTTP proxy on 127.0.0.1: CONNECT tunnels (relayed byte for byte) and absolute-form requests
    (forwarded in origin form). It records each request line and its headers, and counts tunnels,
    forwarded requests and relayed bytes. `require` is the Proxy-Authorization it demands (407
    otherwise); `trickle` > 0 answers CONNECT one byte every `trickle` seconds, never finishing."""

    def __init__(self, require: str | None = None, trickle: float = 0.0):
        self.require = require
        self.trickle = trickle
        self.lines: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.tunnels = 0
        self.forwarded = 0
        self.relayed = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=5)
        self.listener.close()

    def _accept(self):
        while not self.stop.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket):
        client.settimeout(5)
        with client:
            reader = client.makefile("rb")
            line = reader.readline(65536).decode("latin-1").rstrip("\r\n")
            headers: dict[str, str] = {}
            for _ in range(100):
                raw = reader.readline(65536).decode("latin-1").rstrip("\r\n")
                if not raw:
                    break
                name, _, value = raw.partition(":")
                headers[name.strip().lower()] = value.strip()
            with self.lock:
                self.lines.append(line)
                self.headers.append(headers)
            method, target, _ = line.split(" ", 2)
            if self.require is not None and headers.get("proxy-authorization") != self.require:
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                return
            if method == "CONNECT":
                self._tunnel(client, target)
            else:
                self._forward(client, reader, method, target, headers)

    def _tunnel(self, client, target):
        if self.trickle:
            for byte in b"HTTP/1.1 200 Connection established\r\n" * 100:
                if self.stop.wait(self.trickle):
                    return
                try:
                    client.sendall(bytes([byte]))
                except OSError:
                    return
            return
        host, _, port = target.rpartition(":")
        upstream = socket.create_connection((host, int(port)), timeout=5)
        with self.lock:
            self.tunnels += 1
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with upstream:
            for _ in range(10_000):  # bounded: a test's exchange is a few dozen chunks
                ready, _, _ = select.select([client, upstream], [], [], 0.1)
                if self.stop.is_set():
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    (upstream if s is client else client).sendall(data)
                    with self.lock:
                        self.relayed += len(data)

    def _forward(self, client, reader, method, target, headers):
        from urllib.parse import urlsplit

        parts = urlsplit(target)
        length = int(headers.get("content-length") or 0)
        body = reader.read(length) if length else b""
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        kept = {k: v for k, v in headers.items() if k not in ("proxy-authorization", "connection")}
        lines = [f"{method} {path} HTTP/1.1", *(f"{k}: {v}" for k, v in kept.items()), "Connection: close"]
        with socket.create_connection((parts.hostname, parts.port or 80), timeout=5) as upstream:
            upstream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            answer = b""
            for _ in range(1000):
                chunk = upstream.recv(65536)
                if not chunk:
                    break
                answer += chunk
        with self.lock:
            self.forwarded += 1
            self.relayed += len(answer)
        client.sendall(answer)
