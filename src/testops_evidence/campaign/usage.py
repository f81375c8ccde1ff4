"""Usage and cost with their coverage: what a cell reports, and totals per case, lane and campaign.

A cell reports each usage counter either as a plain integer (``reported``: the figure a provider or the
harness measured) or as ``{"value": n, "coverage": "estimated" | "partial"}`` (``estimated``: computed,
for example tokens times a price list; ``partial``: a lower bound, some calls were not counted), or as
``{"coverage": "unavailable"}`` (the harness knows the counter but has no figure). Only the allow-listed
counters (:data:`cells.USAGE_ALLOWED`) reach published evidence.

A total never adds an unavailable figure as zero. Over the figures it sums — one per counter per trial,
every admitted attempt of it included (a superseded attempt was paid for too), a trial without an admitted
cell counting as unavailable — a total is

* ``unavailable`` (no value) when no figure has a value;
* ``partial`` (its value a lower bound) when any figure is unavailable or partial;
* ``estimated`` when any figure is estimated;
* ``reported`` when every figure was reported.

A figure is at most :data:`MAX_FIGURE` (2^53 - 1: the largest integer every JSON reader — JavaScript's
included, which Allure Report is — keeps exactly; the cell schema refuses more). A total that would pass it
is that maximum, ``partial``: a true lower bound, where the exact sum would break the receipt's readers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REPORTED, ESTIMATED, PARTIAL, UNAVAILABLE = "reported", "estimated", "partial", "unavailable"
COVERAGES = (REPORTED, ESTIMATED, PARTIAL, UNAVAILABLE)
COST = "cost-nanodollars"
MAX_FIGURE = 2**53 - 1


@dataclass(frozen=True)
class Figure:
    """One counter's figure: its value (None: unavailable) and its coverage."""

    value: int | None
    coverage: str
    figures: int = 1  # how many figures a total was made of
    known: int = 1  # how many of them had a value

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "coverage": self.coverage}

    def to_cell_json(self) -> int | dict[str, Any]:
        """As a cell reports it (and the receipt's rows record it): an integer when reported, else
        ``{"value", "coverage"}`` or ``{"coverage": "unavailable"}`` — compact for 10,000-row receipts."""
        if self.value is None:
            return {"coverage": UNAVAILABLE}
        return self.value if self.coverage == REPORTED else {"value": self.value, "coverage": self.coverage}

    def to_total_json(self) -> dict[str, Any]:
        return {"value": self.value, "coverage": self.coverage, "figures": self.figures, "known": self.known}


MISSING = Figure(None, UNAVAILABLE, 1, 0)


def parse(raw: Any) -> Figure:
    """A schema-valid counter of a cell's ``usage``."""
    if isinstance(raw, int):
        return Figure(raw, REPORTED)
    coverage = str(raw["coverage"])
    if coverage == UNAVAILABLE:
        return MISSING
    return Figure(int(raw["value"]), coverage)


def cell_figures(document: Mapping[str, Any], allowed: Sequence[str]) -> dict[str, Figure]:
    """The allow-listed counters a cell reports."""
    raw = document.get("usage") or {}
    return {name: parse(raw[name]) for name in allowed if name in raw}


def total(figures: Iterable[Figure]) -> Figure:
    """The sum of ``figures`` with its coverage (see the module docstring)."""
    value = 0
    count = known = 0
    coverages: set[str] = set()
    for figure in figures:
        count += figure.figures
        known += figure.known
        coverages.add(figure.coverage)
        if figure.value is not None:
            value += figure.value
    if count == 0 or known == 0:
        return Figure(None, UNAVAILABLE, count, 0)
    if value > MAX_FIGURE:
        # Saturated: the maximum is still a true lower bound of what was spent.
        return Figure(MAX_FIGURE, PARTIAL, count, known)
    if UNAVAILABLE in coverages or PARTIAL in coverages or known < count:
        coverage = PARTIAL
    elif ESTIMATED in coverages:
        coverage = ESTIMATED
    else:
        coverage = REPORTED
    return Figure(value, coverage, count, known)


def total_of_one(figure: Figure) -> Figure:
    """``total([figure])``, written out: most trials have one attempt, and an export totals each of them."""
    count, known = figure.figures, figure.known
    if count == 0 or known == 0:
        return Figure(None, UNAVAILABLE, count, 0)
    value = figure.value if figure.value is not None else 0
    if value > MAX_FIGURE:
        return Figure(MAX_FIGURE, PARTIAL, count, known)
    coverage = figure.coverage
    if coverage in (UNAVAILABLE, PARTIAL) or known < count:
        coverage = PARTIAL
    elif coverage != ESTIMATED:
        coverage = REPORTED
    if value == figure.value and coverage == figure.coverage:
        return figure  # immutable: the total of one figure is that figure
    return Figure(value, coverage, count, known)


def totals(items: Iterable[Mapping[str, Figure] | None], counters: Sequence[str]) -> dict[str, Figure]:
    """Per counter, the total over ``items`` (one per trial attempt; None: a trial with no admitted cell)."""
    rows = list(items)
    if len(rows) == 1:
        item = rows[0]
        return {name: total_of_one(item.get(name, MISSING) if item is not None else MISSING) for name in counters}
    return {name: total((item.get(name, MISSING) if item is not None else MISSING) for item in rows)
            for name in counters}


def money(nanodollars: int) -> str:
    """Nanodollars as dollars, exactly below a dollar: ``$0.06123``, ``$0.00000015``, ``$12.34``, ``$1,234.50``."""
    if 0 < nanodollars < 1_000_000_000:
        digits = f"{nanodollars:09d}".rstrip("0")
        return "$0." + digits.ljust(4, "0")
    return f"${nanodollars / 1_000_000_000:,.2f}"


def show(name: str, figure: Figure) -> str:
    """A figure as the summary shows it: value (coverage), never a zero for unavailable."""
    if figure.value is None:
        return "unavailable"
    text = money(figure.value) if name == COST else f"{figure.value:,}"
    if figure.coverage == PARTIAL:
        share = f": {figure.known} of {figure.figures} figures" if figure.known < figure.figures else ""
        return f"≥ {text} (partial{share})"
    return text if figure.coverage == REPORTED else f"{text} ({figure.coverage})"


Item = Mapping[str, Figure] | None  # one admitted attempt's figures; None: a trial without an admitted cell


@dataclass(frozen=True)
class Accounts:
    """Usage totals of one export: per trial, per case, per lane and for the campaign."""

    counters: tuple[str, ...]
    trials: Mapping[tuple[str, int], Mapping[str, Figure]]
    cases: Mapping[str, Mapping[str, Figure]]
    lanes: Mapping[str, Mapping[str, Figure]]
    campaign: Mapping[str, Figure]

    def receipt_block(self) -> dict[str, Any]:
        return {"counters": list(self.counters),
                "campaign": {name: figure.to_total_json() for name, figure in self.campaign.items()},
                "lanes": {lane: {name: figure.to_total_json() for name, figure in totals_.items()}
                          for lane, totals_ in self.lanes.items()}}


def account(units: Iterable[tuple[str, str, int, Sequence[Item]]], allowed: Sequence[str]) -> Accounts:
    """Totals of every counter any cell mentions (and always the cost) over ``units``: (case key, lane,
    trial, the figures of each admitted attempt of that trial — ``[None]`` when none was admitted)."""
    rows = list(units)
    seen = {name for *_, items in rows for item in items if item is not None for name in item}
    counters = tuple(name for name in allowed if name in seen or name == COST)
    trials = {(key, trial): totals(items, counters) for key, _lane, trial, items in rows}
    by_case: dict[str, list[Item]] = {}
    by_lane: dict[str, list[Item]] = {}
    trial_count: dict[str, int] = {}
    for key, lane, _trial, items in rows:
        by_case.setdefault(key, []).extend(items)
        by_lane.setdefault(lane, []).extend(items)
        trial_count[key] = trial_count.get(key, 0) + 1
    # A case measured once: its total is its only trial's, over the very same items.
    cases = {key: trials[(key, 1)] if trial_count[key] == 1 and (key, 1) in trials else totals(items, counters)
             for key, items in by_case.items()}
    return Accounts(counters, trials, cases,
                    {lane: totals(items, counters) for lane, items in by_lane.items()},
                    totals([item for *_, items in rows for item in items], counters))
