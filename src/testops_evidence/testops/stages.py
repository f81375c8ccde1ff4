"""Once-marked changes: mark, send once, record done (docs/testops.md, "Once-markers").

A flow hands every change to :class:`Stages`, which writes the once-marker (kind, endpoint, project, the
facts ``reconcile`` observes, and the exact request when it may be replayed) before the request leaves,
and the completion record after. The marks live in the phase's state directory, passed in as a plain
:class:`Marks` (``safeio.StateDir`` is one); the flows never see a ``PhaseContext``.
"""

from __future__ import annotations

from typing import Any, Protocol

from testops_evidence.errors import Refusal
from testops_evidence.testops.api import Request, send
from testops_evidence.testops.client import TestOpsClient
from testops_evidence.testops.observe import marker_detail


class Marks(Protocol):
    """Where once-markers and completion records are written (``safeio.StateDir``)."""

    def once(self, stage: str, detail: dict[str, Any] | None = None) -> Any: ...

    def done(self, stage: str, result: dict[str, Any]) -> Any: ...


class Stages:
    """Once-mark, send, record done. With ``gateway_uncertain`` a 5xx or 408 answer to a change is
    ``testops.uncertain`` (a gateway error does not say whether the backend applied it)."""

    def __init__(self, marks: Marks, client: TestOpsClient, *, gateway_uncertain: bool = False) -> None:
        self.marks = marks
        self.client = client
        self.gateway_uncertain = gateway_uncertain

    def send(self, stage: str, kind: str, request: Request, *, files: Any = None,
             facts: dict[str, Any] | None = None, replayable: bool = True) -> Any:
        """Once-mark ``stage`` (recording ``request`` when it may be replayed), then send it once."""
        self.mark(stage, kind, request if replayable else None, facts)
        return self.call(stage, request, files=files)

    def mark(self, stage: str, kind: str, request: Request | None = None,
             facts: dict[str, Any] | None = None) -> None:
        """Once-mark a stage that may cover several requests (each then sent with :meth:`call`)."""
        self.marks.once(stage, marker_detail(self.client, kind, None if request is None else request.to_json(),
                                             **(facts or {})))

    def call(self, stage: str, request: Request, *, files: Any = None) -> Any:
        """Send one request of a once-marked stage, exactly once."""
        if not self.gateway_uncertain:
            return send(self.client, request, files=files)
        try:
            return send(self.client, request, files=files)
        except Refusal as refusal:
            status = refusal.http_status
            if status is not None and (status >= 500 or status == 408):
                raise Refusal("testops.uncertain", f"stage {stage}: {request.method} {request.path} answered HTTP "
                              f"{status}; it may or may not have taken effect and is not re-sent automatically",
                              field="stage", expected="a definite answer", actual=stage) from None
            if refusal.code == "testops.uncertain":
                raise Refusal("testops.uncertain", f"stage {stage}: {refusal.message}", field="stage",
                              expected="a definite answer", actual=stage) from None
            raise

    def done(self, stage: str, facts: dict[str, Any]) -> None:
        self.marks.done(stage, facts)
