"""Case order-total: one test per check (test_sums_lines -> sums-lines)."""

from shop_agent import order_total


def test_sums_lines() -> None:
    assert order_total([(2, 250), (1, 1000)]) == 1500


def test_applies_discount() -> None:
    assert order_total([(1, 1000)], discount_percent=10) == 900
