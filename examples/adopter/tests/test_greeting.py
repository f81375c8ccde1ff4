"""Case greeting."""

from shop_agent import greet


def test_says_name() -> None:
    assert greet("  Ada ") == "Hello, Ada!"
