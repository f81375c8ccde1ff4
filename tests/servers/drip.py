"""A dripping answer for the test servers: one byte (or one one-byte chunk) every ``every`` seconds.

A client whose timeout is per read never notices such a server (each read gets its byte in time), so only a
deadline over the whole answer ends the wait. The drip records how many bytes it sent and whether the client
hung up before the last one, so tests can prove the client left early without timing anything.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.client import responses
from typing import BinaryIO

PARTS = ("headers", "body", "chunked")


@dataclass
class Drip:
    """``part``: ``headers`` drips the whole answer from its status line on (a Content-Length body);
    ``body`` sends status and headers at once, then the body a byte at a time; ``chunked`` sends a chunked
    body of one-byte chunks, one chunk every ``every`` seconds."""

    every: float
    part: str = "body"
    sent: int = 0  # bytes of the dripped part written
    total: int = 0  # bytes the dripped part has in all
    hung_up: bool = False  # the client closed the connection before the drip was done
    done: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.part not in PARTS:
            raise ValueError(f"part must be one of {PARTS}, not {self.part!r}")

    def left_early(self, wait: float = 60.0) -> bool:
        """Whether the client hung up before the drip was done (the server notices within two more bytes);
        waits up to ``wait`` seconds for the drip to end, which is no measure of the client's speed."""
        return self.done.wait(wait) and self.hung_up and self.sent < self.total

    def serve(self, out: BinaryIO, status: int, headers: Mapping[str, str], body: bytes,
              stop: threading.Event | None = None) -> None:
        """Write the answer to ``out`` (a handler's wfile), dripping the chosen part; never raises OSError."""
        wait = (stop or threading.Event()).wait
        fields = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "transfer-encoding")}
        if self.part == "chunked":
            fields["Transfer-Encoding"] = "chunked"
        else:
            fields["Content-Length"] = str(len(body))
        fields["Connection"] = "close"
        head = (f"HTTP/1.1 {status} {responses.get(status, 'Status')}\r\n"
                + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n").encode("latin-1")
        if self.part == "headers":
            pieces, prefix = [bytes([b]) for b in head + body], b""
        elif self.part == "body":
            pieces, prefix = [bytes([b]) for b in body], head
        else:
            pieces, prefix = [b"1\r\n" + bytes([b]) + b"\r\n" for b in body] + [b"0\r\n\r\n"], head
        self.total = len(pieces)
        try:
            if prefix:
                out.write(prefix)
                out.flush()
            for piece in pieces:
                if wait(self.every):
                    return  # the server is stopping
                out.write(piece)
                out.flush()
                self.sent += 1
        except OSError:
            self.hung_up = True
        finally:
            self.done.set()
