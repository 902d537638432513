"""A loopback HTTP proxy in front of the local S3 server that loses one response on purpose.

Every request is forwarded unchanged (SigV4 signs the Host header, which the proxy passes on as
the client sent it); once armed, the first conditional PUT (``If-None-Match``) whose path matches
reaches the server, which stores the object, but its response is never delivered: the proxy
closes the client's connection instead, as a network failure after the server answered would.
The client's retry of that PUT then meets the object its first attempt wrote.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass, field


@dataclass
class ConditionalPut:
    path: str
    status: int
    dropped: bool


@dataclass
class DropOneCommitResponse:
    upstream: tuple[str, int]
    pattern: re.Pattern | None = None  # armed when set
    puts: list[ConditionalPut] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True, name="fault-proxy").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def arm(self, path_regex: str) -> None:
        """Lose the response of the next conditional PUT whose path matches ``path_regex``."""
        with self._lock:
            self.pattern = re.compile(path_regex)

    def stop(self) -> None:
        self._stopped = True
        self._server.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        reader = client.makefile("rb")
        try:
            while True:
                head = _read_head(reader)
                if head is None:
                    return
                request_line, headers = head
                method, target = request_line.split(" ")[:2]
                if any(k.lower() == "expect" and v.lower() == "100-continue" for k, v in headers):
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")  # the body is then forwarded whole
                    headers = [(k, v) for k, v in headers if k.lower() != "expect"]
                body = _read_body(reader, headers)
                if upstream is None:
                    upstream = socket.create_connection(self.upstream)
                    upstream_reader = upstream.makefile("rb")
                upstream.sendall(_encode(request_line, headers, body))
                status_line, response_headers = _read_head(upstream_reader)
                response_body = b"" if method == "HEAD" else _read_body(upstream_reader, response_headers,
                                                                          response=True, status_line=status_line)
                status = int(status_line.split(" ")[1])
                conditional = method == "PUT" and any(k.lower() == "if-none-match" for k, _ in headers)
                drop = False
                if conditional:
                    path = target.split("?")[0]
                    with self._lock:
                        drop = self.pattern is not None and bool(self.pattern.search(path))
                        if drop:
                            self.pattern = None  # once
                        self.puts.append(ConditionalPut(path, status, drop))
                if drop:
                    return  # the server answered; the client never hears it
                client.sendall(_encode(status_line, response_headers, response_body))
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()


def _read_head(reader) -> tuple[str, list[tuple[str, str]]] | None:
    first = reader.readline()
    if not first:
        return None
    headers = []
    while True:
        line = reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        name, _, value = line.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    return first.decode("latin-1").rstrip("\r\n"), headers


def _header(headers, name: str) -> str | None:
    return next((v for k, v in headers if k.lower() == name), None)


def _read_body(reader, headers, response: bool = False, status_line: str = "") -> bytes:
    """The message body as sent (chunked bodies kept chunked)."""
    if response:
        code = int(status_line.split(" ")[1])
        if code < 200 or code in (204, 304):
            return b""
    if (_header(headers, "transfer-encoding") or "").lower() == "chunked":
        raw = bytearray()
        while True:
            size_line = reader.readline()
            raw += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    line = reader.readline()
                    raw += line
                    if line in (b"\r\n", b"\n", b""):
                        return bytes(raw)
            raw += reader.read(size + 2)
    length = _header(headers, "content-length")
    if length is not None:
        return reader.read(int(length))
    return reader.read() if response else b""


def _encode(first_line: str, headers, body: bytes) -> bytes:
    head = first_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return head.encode("latin-1") + body
