"""CPython's cycle collector while ``export`` runs: paused while every input is accepted, back at the first one
refused.

An export is one pass that keeps most of what it reads until it ends (10,000 cells, their documents, results and
receipt rows). Every full collection walked all of it again, about a tenth of a 10,000-cell export's CPU time,
and found nearly nothing: documents hold no reference cycles, and reference counting frees everything else at
once (peak memory did not change; BENCHMARKS.md). Refused input is different: a cell that fails its schema
leaves jsonschema's error objects behind, which point at each other and at the cell's values, and only the
collector frees them. A worker under evaluation could upload many such cells; so the first refusal of a cell
or of a report (``resume``) turns the collector back on for the rest of the phase, and the refusals kept as
evidence drop the frames they were raised in (:func:`cells.admit`).
"""

from __future__ import annotations

import gc

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

_paused: list[bool] = []  # one entry per run_paused in progress: whether the collector was on before it


def run_paused(function: Callable[..., Any], *args: Any) -> Any:
    """``function(*args)`` with the collector paused (unless :func:`resume` is called), its state restored after."""
    _paused.append(gc.isenabled())
    gc.disable()
    try:
        return function(*args)
    finally:
        if _paused.pop():
            gc.enable()
        else:
            gc.disable()


def resume() -> None:
    """Input was refused: collect cycles as usual from now on (a no-op outside :func:`run_paused`)."""
    if _paused and not gc.isenabled():
        gc.enable()
