"""Case refund-policy."""

from datetime import date

from shop_agent import refund_allowed


def test_refuses_late_refund() -> None:
    assert not refund_allowed(date(2026, 1, 1), date(2026, 3, 1))


def test_grants_timely_refund() -> None:
    assert refund_allowed(date(2026, 1, 1), date(2026, 1, 20))
