"""Phases: one module per mode. Each module exposes ``run(ctx: PhaseContext) -> PhaseResult``.

Phases use the domain modules; nothing outside this package imports phases (the CLI loads them by
name, lazily, so a phase that needs no network library never imports one).
"""

from __future__ import annotations

# mode -> module name inside this package
PHASE_MODULES: dict[str, str] = {
    "guard": "guard",
    "bootstrap": "bootstrap",
    "launch": "launch",
    "select": "select",
    "verify-selection": "verify_selection",
    "collect-cells": "collect_cells",
    "export": "export",
    "stream": "stream",
    "verify-stream": "verify_stream",
    "upload": "upload",
    "verify": "verify",
    "import": "import_cells",
    "reconcile": "reconcile",
    "pages": "pages",
    "check": "check",
    "rehearse": "rehearse",
    "cell": "cell",
    "verify-attestation": "verify_attestation",
}
