"""A tiny stand-in for an evaluation harness: each contract check of each case is one pytest test.

It marks every test with its case and check — as JUnit properties (``record_property``) and, when
allure-pytest is installed, as Allure labels — which is the explicit mapping rule the adapters read
(docs/evidence.md). Real harnesses drive an agent here; this one only replays the scenarios in
conftest.py, so the rehearsal shows a pass, a behaviour failure and an infrastructure failure.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

try:
    import allure
except ImportError:  # allure-pytest is optional: JUnit properties alone are enough for the adapters
    allure = None


@pytest.mark.usefixtures("sandbox")  # the sandbox fixture errors for an infrastructure failure
def test_check(case: str, check: str, outcome: str, record_property: Callable[[str, object], None]) -> None:
    record_property("case", case)
    record_property("check", check)
    if allure is not None:
        allure.dynamic.label("case", case)
        allure.dynamic.label("check", check)
    assert outcome != "fail", f"{case}: the check {check} did not hold (the agent did not report its spend)"
