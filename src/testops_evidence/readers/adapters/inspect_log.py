"""Inspect AI logs (``.eval`` archives and ``.json`` files, log format version 2) → a framework run.

Read without importing inspect_ai: the format is the one inspect_ai's ``log/_log.py`` defines (learned
from it and from the logs it writes), checked by our own schema (``schemas/inspect-log.schema.json``)
after the version: an unknown version is ``export.log_version``, naming it.

* ``.json``: one ``EvalLog`` document with its samples.
* ``.eval``: a zip (Zstandard entries) read through the safe archive reader: ``header.json`` (the log
  without samples; absent while the eval runs or after it crashed, then ``_journal/start.json``) and the
  sample summaries (``summaries.json``, else ``_journal/summaries/<n>.json``), within a budget of their
  declared sizes checked before anything is inflated (``export.log_budget``). The sample transcripts
  (``samples/<id>_epoch_<n>.json``) are not inflated, but every summary must have one: a result for a
  sample the log holds no record of running is ``export.log_inconsistent``. Older Inspect AI versions
  wrote summaries without ``model_usage``; the usage of those samples is then read from their records,
  within a budget of their declared sizes (:data:`RECORD_USAGE_BUDGET`; past it, their usage is unavailable).

Mapping (docs/evidence.md, "Inspect AI"): a sample belongs to the case its ``case`` metadata names, else
the case whose key is its id; each of its epochs is a unit. Each score is an outcome named by its scorer
(a dict score: one outcome per key, and one for the scorer that passes when every key passes); a score
``metadata.check`` names the check explicitly. A score passes when Inspect's own reading of it as a number
is 1 (``C``, ``true``, ``yes``, ``1``). A sample error or a limit hit is an error outcome; a missing score,
an invalidated sample, or an epoch the log promised and does not hold leaves the check not recorded; a
sample of ``eval.dataset.sample_ids`` that the log holds in no epoch could have measured any case (its case
is in its own metadata), so no case of the log can pass; an eval whose status is not ``success``, or an
invalidated log, cannot support a pass.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from testops_evidence.errors import Refusal
from testops_evidence.readers.adapters import ERROR, FAILED, MISSING, PASSED, Outcome, short_message
from testops_evidence.readers.adapters.frameworks import (
    FrameworkRun,
    Unit,
    check_version,
    counter,
    dollars_to_nanodollars,
    inconsistent,
    load_json,
    over_budget,
    refuse,
    seconds_to_ms,
    time_ms,
    value_bound,
)
from testops_evidence.readers.archive import MIB, ArchiveLimits, extract_zip
from testops_evidence.readers.integers import ascii_int

TOOL = "Inspect AI log"
SUPPORTED_VERSIONS = (2,)
LOG_LIMIT = 512 * MIB  # the .eval or .json file
EVAL_LIMITS = ArchiveLimits(
    max_entries=200_000,  # one entry per sample epoch, plus the journal
    max_entry_bytes=256 * MIB,
    max_total_bytes=4096 * MIB,  # declared; only the header and summaries are inflated
    max_ratio=1000,  # Zstandard on repetitive transcripts goes past deflate's 100:1
    ratio_floor=1 * MIB,
    max_directory_bytes=64 * MIB,
    zstandard=True,
)
# What an .eval may make us inflate: its header and sample summaries (Inspect writes about 2 KB of
# summary per sample epoch, so 64 MiB holds some 30,000 of them); the transcripts are never inflated.
SUMMARY_BUDGET = 64 * MIB
# Parsed JSON costs up to ~80 bytes a value (`[[],[],...]` is 3 bytes a list): the values are bounded too.
# Inspect's summaries hold about one value per 18 bytes, so 64 MiB of them is some 3.7 million.
SUMMARY_VALUES = 4_000_000
# Older summaries carry no usage: it is read from the sample records (transcripts) instead, as long as the
# records of those samples declare at most this much; past it their usage is reported unavailable, never zero.
RECORD_USAGE_BUDGET = 64 * MIB
_HEADER = "header.json"
_START = "_journal/start.json"
_SUMMARIES = "summaries.json"
_JOURNAL_SUMMARIES = "_journal/summaries/"
_SAMPLES = "samples/"
_CORRECT = {"c", "yes", "true"}


@dataclass(frozen=True)
class Sample:
    """One sample epoch, from a full sample (``.json``) or a summary (``.eval``)."""

    id: str
    epoch: int
    case: str
    scores: Mapping[str, Any] | None
    error: str | None
    limit: str | None
    invalidated: bool
    usage: Mapping[str, int | None]
    start_ms: int | None
    stop_ms: int | None
    edited: int  # scores changed after the run (Inspect's score history)


@dataclass(frozen=True)
class InspectLog:
    version: int
    status: str
    task: str
    epochs: int
    sample_ids: tuple[str, ...] | None
    scorers: tuple[str, ...]
    samples: tuple[Sample, ...]
    error: str | None
    invalidated: bool
    started_ms: int | None
    completed_ms: int | None


def read_log(data: bytes, source: str) -> InspectLog:
    """An Inspect log's bytes (either form, told apart by content, not by name) → :class:`InspectLog`."""
    if data[:4] == b"PK\x03\x04" or data[:4] == b"PK\x05\x06":
        return _read_eval(data, source)
    if data.lstrip()[:1] == b"{":
        document = load_json(data, TOOL, source, constants=True, advice="; write the log as .eval (Inspect's "
                             "default), which is read without its transcripts")
        return _from_document(document, source, None)
    raise refuse(TOOL, source, "is neither an .eval archive nor a JSON log", expected="an Inspect AI log")


def _check_version(document: Any, source: str) -> None:
    check_version(document.get("version") if isinstance(document, dict) else None, SUPPORTED_VERSIONS, tool=TOOL,
                  source=source, field="version", what="log format version",
                  expected="an Inspect AI log (version 2)")


def _validate(document: Any, source: str) -> None:
    from testops_evidence.contract import validate_document

    _check_version(document, source)
    validate_document("inspect-log", document, "export.adapter", f"{TOOL} {source}")


def _read_eval(data: bytes, source: str) -> InspectLog:
    # The entries are listed (nothing inflated) before any is read: only the header and one set of sample
    # summaries are needed, and their declared sizes (which the reader enforces) must fit the budget
    # before a byte is inflated: a few kilobytes of Zstandard can declare hundreds of megabytes.
    listing = extract_zip(data, limits=EVAL_LIMITS, select=frozenset().__contains__)
    wanted = _wanted_entries(listing.sizes)
    declared = sum(listing.sizes[name] for name in wanted)
    if declared > SUMMARY_BUDGET:
        raise Refusal("export.log_budget", f"{TOOL} {source}: its header and sample summaries declare {declared:,} "
                      f"bytes, over the {SUMMARY_BUDGET:,}-byte budget for reading them",
                      field=source, expected=f"<= {SUMMARY_BUDGET} bytes", actual=declared)
    archive = extract_zip(data, limits=EVAL_LIMITS, select=wanted.__contains__)
    files = archive.files
    values = sum(value_bound(entry.data) for entry in files.values())
    if values > SUMMARY_VALUES:
        raise over_budget(TOOL, f"{source} (its header and sample summaries)", values, SUMMARY_VALUES)
    header_name = _HEADER if _HEADER in files else _START
    if header_name not in files:
        raise refuse(TOOL, source, "is a zip without header.json or _journal/start.json",
                     expected="an Inspect AI .eval log")
    header = load_json(files[header_name].data, TOOL, f"{source}:{header_name}", constants=True)
    _check_version(header, f"{source}:{header_name}")
    if header_name == _START:  # the eval never finished writing its header: it is running or crashed
        header = {**header, "status": "started"} if isinstance(header, dict) else header
    if _SUMMARIES in files:
        summaries = load_json(files[_SUMMARIES].data, TOOL, f"{source}:{_SUMMARIES}", constants=True)
        if not isinstance(summaries, list):
            raise refuse(TOOL, f"{source}:{_SUMMARIES}", "is not a list of sample summaries")
    else:
        summaries = []
        journal = sorted((name for name in files if name.startswith(_JOURNAL_SUMMARIES)),
                         key=lambda name: _journal_index(name, source))
        for name in journal:
            part = load_json(files[name].data, TOOL, f"{source}:{name}", constants=True)
            if not isinstance(part, list):
                raise refuse(TOOL, f"{source}:{name}", "is not a list of sample summaries")
            summaries.extend(part)
    if not isinstance(header, dict):
        raise refuse(TOOL, f"{source}:{header_name}", "is not a JSON object")
    log = _from_document({**header, "samples": summaries}, source, header_name)
    config = header.get("eval", {}).get("config", {}) if isinstance(header.get("eval"), dict) else {}
    if config.get("log_samples") is not False:
        names = set(archive.names)
        for sample in log.samples:
            entry = f"{_SAMPLES}{sample.id}_epoch_{sample.epoch}.json"
            if entry not in names:
                raise inconsistent(TOOL, source, f"it has a result for sample {sample.id!r} epoch {sample.epoch} "
                                   f"but no record of running it ({entry})", expected=entry, actual="absent")
        without = {index for index, raw in enumerate(summaries) if isinstance(raw, dict) and "model_usage" not in raw}
        if without:
            log = _usage_from_records(data, log, without, listing.sizes, source)
    return log


def _usage_from_records(data: bytes, log: InspectLog, indices: set[int], sizes: Mapping[str, int],
                        source: str) -> InspectLog:
    """The log with the usage of the samples at ``indices`` (whose summaries carry none: older Inspect AI
    versions) read from their sample records; unchanged when those records declare more than the budget."""
    import dataclasses

    entries = {index: f"{_SAMPLES}{log.samples[index].id}_epoch_{log.samples[index].epoch}.json" for index in indices}
    if sum(sizes.get(entry, 0) for entry in entries.values()) > RECORD_USAGE_BUDGET:
        return log
    files = extract_zip(data, limits=EVAL_LIMITS, select=set(entries.values()).__contains__).files
    if sum(value_bound(entry.data) for entry in files.values()) > SUMMARY_VALUES:
        return log
    samples = list(log.samples)
    for index, entry in entries.items():
        record = load_json(files[entry].data, TOOL, f"{source}:{entry}", constants=True)
        if not isinstance(record, dict) or "model_usage" not in record:
            continue
        where = f"{source}:{entry}"
        usage = {**samples[index].usage, **{name: value for name, value in _usage(record, where).items()
                                            if samples[index].usage.get(name) is None}}
        samples[index] = dataclasses.replace(samples[index], usage=usage)
    return dataclasses.replace(log, samples=tuple(samples))


def _wanted_entries(sizes: Mapping[str, int]) -> set[str]:
    """The entries to inflate: the header (or the journal's start) and the sample summaries — the finished
    ``summaries.json`` when the eval wrote it, else the journal's parts (never both: they repeat each other)."""
    wanted = {name for name in (_HEADER, _START) if name in sizes}
    if _SUMMARIES in sizes:
        return wanted | {_SUMMARIES}
    return wanted | {name for name in sizes if name.startswith(_JOURNAL_SUMMARIES) and name.endswith(".json")}


def _journal_index(name: str, source: str) -> int:
    stem = name[len(_JOURNAL_SUMMARIES):-len(".json")]
    # ASCII digits only: "²" passes str.isdigit and makes int() raise (issue 24).
    index = ascii_int(stem, maximum=999_999_999)
    if index is None:
        raise refuse(TOOL, f"{source}:{name}", "is a journal entry without a number", actual=name)
    return index


def _from_document(document: Any, source: str, header_name: str | None) -> InspectLog:
    where = f"{source}:{header_name}" if header_name else source
    _validate(document, where)
    spec = document["eval"]
    config = spec.get("config") or {}
    epochs = config.get("epochs") or 1
    dataset = spec.get("dataset") or {}
    raw_ids = dataset.get("sample_ids")
    sample_ids = None if raw_ids is None else tuple(str(item) for item in raw_ids)
    if sample_ids is not None and len(set(sample_ids)) != len(sample_ids):
        raise inconsistent(TOOL, where, "its dataset lists a sample id twice", expected="unique sample ids")
    scorers = [s["name"] for s in spec.get("scorers") or []]
    scorers += [s["name"] for s in (document.get("results") or {}).get("scores") or []]
    stats = document.get("stats") or {}
    error = document.get("error")
    samples = [_sample(raw, f"{source} sample {index}") for index, raw in enumerate(document.get("samples") or [])]
    seen: set[tuple[str, int]] = set()
    for sample in samples:
        key = (sample.id, sample.epoch)
        if key in seen:
            raise inconsistent(TOOL, source, f"sample {sample.id!r} epoch {sample.epoch} appears twice",
                               expected="each sample epoch once", actual=list(key))
        seen.add(key)
        if sample.epoch > epochs:
            raise inconsistent(TOOL, source, f"sample {sample.id!r} has epoch {sample.epoch}, but the eval ran "
                               f"{epochs} epoch(s)", expected=f"1..{epochs}", actual=sample.epoch)
        if sample_ids is not None and sample.id not in sample_ids:
            raise inconsistent(TOOL, source, f"sample {sample.id!r} is not in the eval's dataset",
                               expected="a sample id of eval.dataset.sample_ids", actual=sample.id)
    return InspectLog(
        version=document["version"],
        status=document.get("status", "started"),
        task=spec["task"],
        epochs=epochs,
        sample_ids=sample_ids,
        scorers=tuple(dict.fromkeys(scorers)),
        samples=tuple(samples),
        error=error.get("message") if isinstance(error, dict) else None,
        invalidated=document.get("invalidated") is True,
        started_ms=time_ms(stats.get("started_at"), TOOL, f"{where} stats.started_at"),
        completed_ms=time_ms(stats.get("completed_at"), TOOL, f"{where} stats.completed_at"),
    )


def _sample(raw: Mapping[str, Any], where: str) -> Sample:
    sample_id = str(raw["id"])
    metadata = raw.get("metadata") or {}
    case = metadata.get("case")
    error = raw.get("error")
    limit = raw.get("limit")
    if isinstance(limit, dict):
        limit_text = f"{limit['type']} limit" + (f" ({limit['reason']})" if isinstance(limit.get("reason"), str)
                                                 else "")
    elif isinstance(limit, str):
        reason = raw.get("limit_reason")
        limit_text = f"{limit} limit" + (f" ({reason})" if isinstance(reason, str) else "")
    else:
        limit_text = None
    start_ms = time_ms(raw.get("started_at"), TOOL, f"{where} started_at")
    stop_ms = time_ms(raw.get("completed_at"), TOOL, f"{where} completed_at")
    if start_ms is not None and stop_ms is not None and stop_ms < start_ms:
        raise refuse(TOOL, where, "completed before it started", expected=f">= {raw.get('started_at')}",
                     actual=raw.get("completed_at"))
    scores = raw.get("scores")
    edited = sum(1 for score in (scores or {}).values() if score.get("history"))
    return Sample(
        id=sample_id,
        epoch=raw["epoch"],
        case=case if isinstance(case, str) and case else sample_id,
        scores=scores,
        error=(error.get("message") if isinstance(error, dict) else error) or None,
        limit=limit_text,
        invalidated=raw.get("invalidation") is not None,
        usage=_usage(raw, where),
        start_ms=start_ms,
        stop_ms=stop_ms,
        edited=edited,
    )


def _usage(raw: Mapping[str, Any], where: str) -> dict[str, int | None]:
    """Usage counters of one sample epoch; None where Inspect recorded nothing for it.

    A counter is recorded when every model the sample called has it (Inspect leaves the cache counters
    and the cost ``null`` when the provider reports none); an empty ``model_usage`` records zero (Inspect
    records every model call, so the sample made none)."""
    models = raw.get("model_usage")
    usage: dict[str, int | None] = {}
    fields = (("input-tokens", "input_tokens"), ("output-tokens", "output_tokens"),
              ("cache-read-tokens", "input_tokens_cache_read"), ("cache-write-tokens", "input_tokens_cache_write"))
    for name, key in fields:
        if not isinstance(models, dict):
            usage[name] = None
            continue
        values = [counter(model.get(key), TOOL, f"{where} model_usage.{key}") for model in models.values()]
        usage[name] = None if None in values else sum(v for v in values if v is not None)
    if isinstance(models, dict):
        costs = [dollars_to_nanodollars(model.get("total_cost"), TOOL, f"{where} model_usage.total_cost")
                 for model in models.values()]
        usage["cost-nanodollars"] = None if None in costs else sum(c for c in costs if c is not None)
    else:
        usage["cost-nanodollars"] = None
    usage["duration-ms"] = seconds_to_ms(raw.get("total_time"), TOOL, f"{where} total_time")
    usage["agent-turns"] = counter(raw.get("turn_count"), TOOL, f"{where} turn_count")
    return usage


# --- log -> outcomes -------------------------------------------------------------------------------------


def passes(value: Any) -> bool:
    """Inspect's reading of a score value as a number, equal to 1 (``value_to_float``: C, yes, true, 1)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return math.isfinite(value) and value == 1
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _CORRECT:
            return True
        try:
            number = float(text)
        except ValueError:
            return False
        return math.isfinite(number) and number == 1
    return False


def _describe(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def _score_outcomes(sample: Sample, unit: str, names: Iterable[str], base: Outcome) -> list[Outcome]:
    outcomes: list[Outcome] = []
    scores = sample.scores or {}
    produced: set[str] = set()
    for name, score in scores.items():
        explicit = (score.get("metadata") or {}).get("check")
        checks = (explicit,) if isinstance(explicit, str) and explicit else ()
        value = score.get("value")
        if isinstance(value, dict):
            all_pass = True
            for key, item in value.items():
                produced.add(key)
                if item is None:
                    outcomes.append(_with(base, key, MISSING, f"{unit} has no value for score key {key!r}"))
                    all_pass = False
                    continue
                ok = passes(item)
                all_pass = all_pass and ok
                outcomes.append(_with(base, key, PASSED if ok else FAILED,
                                      None if ok else f"{unit}: {name}.{key} = {_describe(item)}"))
            produced.add(name)
            outcomes.append(_with(base, name, PASSED if all_pass else FAILED,
                                  None if all_pass else f"{unit}: a key of {name} did not pass", checks))
            continue
        produced.add(name)
        ok = passes(value)
        explanation = score.get("explanation")
        detail = f"{unit}: {name} = {_describe(value)}" + (
            f" ({explanation})" if isinstance(explanation, str) and explanation else "")
        outcomes.append(_with(base, name, PASSED if ok else FAILED, None if ok else detail, checks))
    for name in names:
        if name not in produced:
            outcomes.append(_with(base, name, MISSING, f"{unit} has no score from {name}"))
    return outcomes


def _with(base: Outcome, name: str, status: str, message: str | None, checks: tuple[str, ...] = ()) -> Outcome:
    return Outcome(name=name, status=status, message=short_message(message), case=base.case, checks=checks,
                   start_ms=base.start_ms, stop_ms=base.stop_ms, unit=base.unit, trial=base.trial)


def to_run(log: InspectLog) -> FrameworkRun:
    """The outcomes and units of a log (see the module docstring for the mapping)."""
    names: list[str] = list(log.scorers)
    for sample in log.samples:
        for name, score in (sample.scores or {}).items():
            names.append(name)
            if isinstance(score.get("value"), dict):
                names.extend(score["value"])
    names = list(dict.fromkeys(names))
    case_of = {sample.id: sample.case for sample in log.samples}
    present = {(sample.id, sample.epoch) for sample in log.samples}
    units: list[Unit] = []
    outcomes: list[Outcome] = []
    for sample in log.samples:
        unit = f"sample {sample.id} epoch {sample.epoch}"
        units.append(Unit(sample.case, unit, sample.epoch, sample.usage))
        base = Outcome(name="", status=PASSED, case=sample.case, start_ms=sample.start_ms, stop_ms=sample.stop_ms,
                       unit=unit, trial=sample.epoch)
        if sample.error is not None:
            why = f"{unit} errored: {sample.error}"
            outcomes += [_with(base, name, ERROR, why) for name in names]
        elif sample.limit is not None:
            why = f"{unit} hit its {sample.limit}"
            outcomes += [_with(base, name, ERROR, why) for name in names]
        elif sample.invalidated:
            why = f"{unit} was invalidated after the run"
            outcomes += [_with(base, name, MISSING, why) for name in names]
        else:
            outcomes += _score_outcomes(sample, unit, names, base)
    expected_ids = log.sample_ids if log.sample_ids is not None else tuple(dict.fromkeys(s.id for s in log.samples))
    missing = 0
    absent: list[str] = []
    for sample_id in expected_ids:
        if sample_id not in case_of:
            # No epoch of it is in the log, so neither is its metadata: the case it measured is unknown.
            absent.append(sample_id)
            missing += log.epochs
            continue
        for epoch in range(1, log.epochs + 1):
            if (sample_id, epoch) not in present:
                missing += 1
                name = f"sample {sample_id} epoch {epoch}"
                units.append(Unit(case_of[sample_id], name, epoch, {}))
    lost = None
    if absent:
        shown = ", ".join(repr(sample_id) for sample_id in absent[:5]) + (
            f" and {len(absent) - 5} more" if len(absent) > 5 else "")
        lost = (f"sample(s) {shown} of the eval's dataset are not in the log in any epoch; the case a sample "
                "measures is named by its own metadata, so it could be any case of the log")
    incomplete = None
    if log.invalidated:
        incomplete = f"the {TOOL.lower()} of task {log.task!r} is marked invalidated"
    elif log.status != "success":
        reason = f": {short_message(log.error)}" if log.error else ""
        incomplete = f"the Inspect eval of task {log.task!r} ended with status {log.status!r}{reason}"
    notes = []
    if missing:
        notes.append(f"{missing} sample epoch(s) the eval promised are not in the log")
    edited = sum(sample.edited for sample in log.samples)
    if edited:
        notes.append(f"{edited} score(s) were edited after the run (Inspect score history)")
    return FrameworkRun(tool=f"{TOOL} v{log.version}", items="score(s)", outcomes=tuple(outcomes), units=tuple(units),
                        incomplete=incomplete, notes=tuple(notes), lost=lost)
