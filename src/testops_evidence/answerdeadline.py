"""A wall-clock deadline for one HTTP answer that holds while its status line, headers and body arrive.

``requests``' timeouts are per socket operation: a server that sends one byte every (timeout - ε) never
trips them, and can keep a phase waiting as long as it likes. Here every request of the GitHub and TestOps
transports runs inside an :class:`AnswerDeadline`: a watchdog timer that, when the answer's time is up,
shuts the connection's socket down. The read blocked in it returns at once (an error, or an early end of
the answer); the caller sees :attr:`AnswerDeadline.expired` and refuses with its transport's code. A read
that ends early is never taken for the whole answer: leaving the block after expiry raises
:class:`DeadlineExpired` even when the read itself reported success.

The socket is found by the connection classes of :func:`deadline_adapter` (a ``requests`` adapter): each
request starts its time with the deadline of the current context as it is sent and registers its
connection's socket just before the answer is read; once an attempt ran out of time nothing more is sent
(so urllib3 does not retry it), while an attempt that failed otherwise (a read timeout) and is retried gets
the whole time again.

**Time.** Phases inject their clock, sleep and UUIDs (``PhaseContext``) so that tests never really wait.
A socket, though, waits in real time: the watchdog measures real monotonic time (``threading.Timer``), and
the injected clocks only decide *how much* of a budget is left (a per-call deadline, say) before it is
handed over here as a number of seconds.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import socket
import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from requests.adapters import HTTPAdapter

_CURRENT: contextvars.ContextVar[AnswerDeadline | None] = contextvars.ContextVar("answer_deadline", default=None)


class DeadlineExpired(Exception):
    """The answer's deadline passed. Deliberately not an ``OSError``: urllib3 retries those, and a request
    whose time is up must not be sent again. ``sent`` is False when the request was stopped before it went out
    (its time was up already), so a change request is known not to have happened."""

    def __init__(self, seconds: float, *, sent: bool = True) -> None:
        super().__init__(f"no whole answer within {seconds:g} s")
        self.seconds = seconds
        self.sent = sent


class AnswerDeadline:
    """``with AnswerDeadline(seconds):`` — every request sent inside must be answered, body included, within
    ``seconds`` of its start, or its connection is cut and :class:`DeadlineExpired` raised. Each attempt gets
    the whole time (urllib3 retries a GET inside one call after a read timeout); once an attempt has run out
    of time, nothing more is sent in the block."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(0.0, seconds)
        self.expired = False
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._timer: threading.Timer | None = None
        self._attempt = 0  # a timer that fires for an attempt already replaced does nothing
        self._token: contextvars.Token[AnswerDeadline | None] | None = None

    def __enter__(self) -> AnswerDeadline:
        self._token = _CURRENT.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        with self._lock:
            self._attempt += 1
            self._socket = None
            if self._timer is not None:
                self._timer.cancel()
        if self._token is not None:
            _CURRENT.reset(self._token)
        if self.expired and not isinstance(exc, DeadlineExpired):
            # Whatever the read said (an error, or an answer that ended when the socket was cut): too late.
            raise DeadlineExpired(self.seconds) from exc

    def start(self) -> None:
        """A request is about to be sent: its time starts now (or it is not sent, if time ran out already)."""
        with self._lock:
            if self.expired:
                raise DeadlineExpired(self.seconds, sent=False)
            self._attempt += 1
            self._socket = None
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(self.seconds, self._expire, args=(self._attempt,))
            self._timer.daemon = True
            self._timer.start()

    def watch(self, sock: Any) -> None:
        """Cut ``sock`` when the current attempt's time is up (at once if it is up already)."""
        with self._lock:
            self._socket = sock if isinstance(sock, socket.socket) else None
            if self.expired:
                raise DeadlineExpired(self.seconds)

    def _expire(self, attempt: int) -> None:
        with self._lock:
            if attempt != self._attempt:
                return
            self.expired = True
            sock = self._socket
        if sock is not None:
            _cut(sock)


def _cut(sock: socket.socket) -> None:
    # The plain socket's shutdown, also for an SSLSocket: SSLSocket.shutdown drops its SSL object, which the
    # reading thread may be using at that very moment; shutting the descriptor down ends its read cleanly.
    with contextlib.suppress(OSError):  # already closed: nothing is waiting on it
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


def deadline_adapter(**kwargs: Any) -> HTTPAdapter:
    """A ``requests`` HTTPAdapter (same arguments) whose connections obey the current :class:`AnswerDeadline`."""
    return _adapter_class()(**kwargs)


@functools.cache
def _adapter_class() -> type[HTTPAdapter]:
    # Built on first use: requests and urllib3 are imported only by the phases that talk to a server.
    from requests.adapters import HTTPAdapter
    from urllib3.connection import HTTPConnection, HTTPSConnection
    from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
    from urllib3.poolmanager import PoolManager

    class _Connection(HTTPConnection):
        def request(self, *args: Any, **kwargs: Any) -> None:
            deadline = _CURRENT.get()
            if deadline is not None:
                deadline.start()  # each attempt's own time; none is sent once an attempt ran out of it
            super().request(*args, **kwargs)

        def getresponse(self) -> Any:
            return _watched_answer(self, super().getresponse)

    class _TlsConnection(HTTPSConnection):
        def request(self, *args: Any, **kwargs: Any) -> None:
            deadline = _CURRENT.get()
            if deadline is not None:
                deadline.start()
            super().request(*args, **kwargs)

        def getresponse(self) -> Any:
            return _watched_answer(self, super().getresponse)

    class _Pool(HTTPConnectionPool):
        ConnectionCls = _Connection

    class _TlsPool(HTTPSConnectionPool):
        ConnectionCls = _TlsConnection

    def _use_watched_pools(manager: PoolManager) -> PoolManager:
        manager.pool_classes_by_scheme = {"http": _Pool, "https": _TlsPool}
        return manager

    class _DeadlineAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            _use_watched_pools(self.poolmanager)

        def proxy_manager_for(self, proxy: str, **kwargs: Any) -> PoolManager:
            manager: PoolManager = super().proxy_manager_for(proxy, **kwargs)
            if proxy.lower().startswith("socks"):
                # SOCKS pools have connection classes of their own: through such a proxy only the per-read
                # timeouts apply (docs/security.md, known limits).
                return manager
            return _use_watched_pools(manager)

    return _DeadlineAdapter


def _watched_answer(connection: Any, read: Any) -> Any:
    """Read the status line and headers with the connection's socket under the current deadline."""
    deadline = _CURRENT.get()
    if deadline is None:
        return read()
    deadline.watch(connection.sock)
    try:
        return read()
    except Exception:
        # A read the watchdog cut: say so with an exception urllib3 passes on instead of retrying.
        if deadline.expired:
            raise DeadlineExpired(deadline.seconds) from None
        raise
