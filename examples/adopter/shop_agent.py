"""The system under evaluation: a small rule-based shop assistant (stands in for your agent)."""

from __future__ import annotations

from datetime import date


def order_total(lines: list[tuple[int, int]], discount_percent: int = 0) -> int:
    """The total in cents of (quantity, unit price in cents) lines, after a percentage discount."""
    gross = sum(quantity * price for quantity, price in lines)
    # A known bug, left in on purpose so that the campaign reports a failing case: per mille, not per cent.
    return gross - gross * discount_percent // 1000


def refund_allowed(bought: date, asked: date, days: int = 30) -> bool:
    """Refunds are granted within ``days`` of the purchase."""
    return (asked - bought).days <= days


def greet(name: str) -> str:
    return f"Hello, {name.strip()}!"
