"""Fixtures of the reliability campaign: the fuzz counter (see fuzzing.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reliability.fuzzing import Targets, cleanup_scratch


@pytest.fixture
def fuzz() -> Iterator[Targets]:
    targets = Targets()
    yield targets
    targets.finish()


@pytest.fixture(scope="session", autouse=True)
def _fuzz_scratch() -> Iterator[None]:
    yield
    cleanup_scratch()
