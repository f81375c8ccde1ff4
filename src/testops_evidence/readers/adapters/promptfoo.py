"""promptfoo results files (``promptfoo eval -o results.json``, results version 3) → a framework run.

Read as promptfoo's ``OutputFile`` type defines it (learned from its ``src/types`` and the files it
writes), checked by our own schema (``schemas/promptfoo-results.schema.json``) after the version: an
unknown results version is ``export.log_version``, naming it.

Mapping (docs/evidence.md, "promptfoo"): a test belongs to the case its ``case`` var names, else its
``case`` metadata, else its description when that is a case key. Each result (a test x prompt x provider
x repeat) is a unit; each assertion result an outcome named by the assertion's ``metric`` (promptfoo's
own name for an assertion), else its type, mapped to checks by the shared rules. A result that errored
(``failureReason`` 2) is an error for every assertion of its test; an assertion the test declares that
left no result is not recorded; a test promptfoo failed although all its assertions passed (its
threshold or score) fails them all. Repeats stay separate trials; every one must pass: a case's tests, in the
order promptfoo numbered them (``testIdx``), are its trials 1, 2, ... A result missing for one prompt of a
test belongs to that test's case and trial (never to no trial); a test number without any result is a test
whose case is unknown, so no case of the file can pass.

**A run that did not finish passes nothing.** promptfoo saves the results of an interrupted or paused eval
(Ctrl+C, ``promptfoo eval --resume``) as it saves a finished one, and ``promptfoo export eval`` writes them
with consistent stats: only the tests it never reached are absent, so a case whose repeats ran first looks
whole. From 0.120.7 promptfoo writes ``stats.durationMs`` when, and only when, an eval reaches its end: a
file of such a version without it did not finish. Files of earlier versions record no such mark; the tests
their config declares are counted instead (each test's var combinations times its repeats) and must be
exactly the tests numbered in the file; a config whose tests cannot be counted from the file (tests or vars
read from files, scenarios) shows nothing about completion. Either way no check of such a file can pass.

A test restricted to some prompts or providers (its ``prompts:`` / ``providers:``, or
``defaultTest``'s) is expected only in the prompt columns promptfoo ran it in, matched by promptfoo's own
rules (label or id, ``*`` wildcards, ``ref:`` prefixes); a column the rules cannot exclude is expected.

``failureReason`` is absent from results of promptfoo versions before it existed; such a result is read as
those versions meant it: passed when ``success``, else failed by its assertions when it has a grading
result and errored when it has none.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from testops_evidence.readers.adapters import ERROR, FAILED, MISSING, PASSED, Outcome, short_message
from testops_evidence.readers.adapters.frameworks import (
    FrameworkRun,
    Unit,
    check_version,
    counter,
    dollars_to_nanodollars,
    inconsistent,
    load_json,
    time_ms,
)
from testops_evidence.readers.archive import MIB

TOOL = "promptfoo results"
SUPPORTED_VERSIONS = (3,)
RESULTS_LIMIT = 512 * MIB
_NONE, _ASSERT, _ERROR = 0, 1, 2
# The first promptfoo that writes ``stats.durationMs`` when an eval finishes (0.120.5 does not; 0.120.6 was
# never published), read from the packages on npm.
DURATION_SINCE = (0, 120, 7)


def _check_version(document: Any, source: str) -> None:
    results = document.get("results") if isinstance(document, dict) else None
    check_version(results.get("version") if isinstance(results, dict) else None, SUPPORTED_VERSIONS, tool=TOOL,
                  source=source, field="results/version", what="results version",
                  expected="the file `promptfoo eval -o results.json` writes (results.version 3)")


def read_results(data: bytes, source: str) -> FrameworkRun:
    """A promptfoo results file's bytes → its run (see the module docstring for the mapping)."""
    from testops_evidence.contract import validate_document

    document = load_json(data, TOOL, source)
    _check_version(document, source)
    validate_document("promptfoo-results", document, "export.adapter", f"{TOOL} {source}")
    summary = document["results"]
    results: list[Mapping[str, Any]] = summary["results"]
    stats = summary["stats"]
    counted = stats["successes"] + stats["failures"] + stats["errors"]
    if counted != len(results):
        raise inconsistent(TOOL, source, f"its stats count {counted} results but it holds {len(results)}",
                           expected=counted, actual=len(results))
    prompts = len(summary["prompts"])
    start_ms = time_ms(summary.get("timestamp"), TOOL, f"{source} results.timestamp")
    duration = stats.get("durationMs")
    stop_ms = start_ms + int(duration) if start_ms is not None and isinstance(duration, int | float) else start_ms
    seen: set[tuple[int, int]] = set()
    trials = _trials(results)
    outcomes: list[Outcome] = []
    units: list[Unit] = []
    successes = 0
    for index, result in enumerate(results):
        where = f"{source} result {index}"
        key = (result["testIdx"], result["promptIdx"])
        if key in seen:
            raise inconsistent(TOOL, source, f"test {key[0]} prompt {key[1]} has two results",
                               expected="one result per test and prompt", actual=list(key))
        if result["promptIdx"] >= prompts:
            raise inconsistent(TOOL, source, f"result {index} names prompt {result['promptIdx']} of {prompts}",
                               expected=f"0..{prompts - 1}", actual=result["promptIdx"])
        seen.add(key)
        result = _with_reason(result)
        _check_flags(result, where)
        successes += 1 if result["success"] else 0
        case, trial = trials[result["testIdx"]]
        provider = (result.get("provider") or {}).get("label") or (result.get("provider") or {}).get("id") or ""
        unit = f"test {result['testIdx']} prompt {result['promptIdx']}" + (f" ({provider})" if provider else "")
        units.append(Unit(case, unit, trial, _usage(result, where)))
        base = Outcome(name="", status=PASSED, case=case, start_ms=start_ms, stop_ms=stop_ms, unit=unit, trial=trial)
        outcomes += _outcomes(result, unit, base)
    if successes != stats["successes"]:
        raise inconsistent(TOOL, source, f"its stats count {stats['successes']} successes but {successes} results "
                           "succeeded", expected=stats["successes"], actual=successes)
    # Every test ran against every prompt column it was not restricted from: a result missing for one of them
    # was never run, and it belongs to its test's case and trial (the test's other prompts name them).
    columns = _columns(summary["prompts"], results)
    tests = {result["testIdx"]: result["testCase"] for result in results}
    for test in sorted(trials):
        case, trial = trials[test]
        for prompt in range(prompts):
            if (test, prompt) not in seen and _runs_in(tests[test], columns[prompt]):
                units.append(Unit(case, f"test {test} prompt {prompt}", trial, {}))
    version = (document.get("metadata") or {}).get("promptfooVersion")
    notes = [f"written by promptfoo {version}"] if isinstance(version, str) and version else []
    if any("failureReason" not in result for result in results):
        notes.append("results without failureReason read by their grading result (errored when they have none)")
    return FrameworkRun(tool=f"{TOOL} v{summary['version']}", items="assertion result(s)", outcomes=tuple(outcomes),
                        units=tuple(units), notes=tuple(notes), lost=_lost(trials),
                        incomplete=_unfinished(document, set(trials), version))


def _version(text: Any) -> tuple[int, int, int] | None:
    parts = text.split("-", 1)[0].split(".") if isinstance(text, str) else []
    if len(parts) != 3 or not all(part.isdigit() and len(part) <= 9 for part in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def _unfinished(document: Mapping[str, Any], tests: set[int], version: Any) -> str | None:
    """Why the file does not show that its eval finished (None: it does; see the module docstring)."""
    stats = document["results"]["stats"]
    parsed = _version(version)
    shown = f"promptfoo {str(version)[:40]}" if isinstance(version, str) and version else "an unnamed promptfoo"
    if parsed is not None and parsed >= DURATION_SINCE:
        if "durationMs" in stats:
            return None
        return (f"the promptfoo eval did not finish: {shown} writes stats.durationMs when an eval reaches its end, "
                "and this file has none (an interrupted or paused eval; finish it with `promptfoo eval --resume` "
                "and export it again)")
    expected = _declared_tests(document)
    if expected is None:
        return (f"{shown} records no mark of a finished eval (stats.durationMs is written from promptfoo "
                f"{'.'.join(map(str, DURATION_SINCE))}), and the config's tests cannot be counted from the file: "
                "write the results with a newer promptfoo")
    # tests 0 .. expected - 1, each once (compared without building the range: a config may declare billions)
    if len(tests) != expected or (tests and (min(tests) != 0 or max(tests) != expected - 1)):
        return (f"the file does not show that the promptfoo eval finished: its config declares {expected} test(s) "
                f"(with the repeats the file records) but the file numbers {len(tests)} (an interrupted or paused "
                f"eval, or one run with options {shown} does not record)")
    return None


def _declared_tests(document: Mapping[str, Any]) -> int | None:
    """How many tests promptfoo numbers for the file's config (var combinations x repeats of each test), when
    the config says it alone: None for tests, vars or scenarios read from elsewhere."""
    config = document.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("tests"), list) or config.get("scenarios"):
        return None
    repeat = _repeat(_object(document.get("runtimeOptions")).get("repeat"),
                     _repeat(_object(config.get("evaluateOptions")).get("repeat"), 1))
    default_vars = _object(_object(config.get("defaultTest")).get("vars"))
    total = 0
    for test in config["tests"]:
        if not isinstance(test, dict):
            return None
        variables = {**default_vars, **_object(test.get("vars"))}
        combinations = 1
        options = _object(test.get("options"))
        for value in variables.values():
            if isinstance(value, str) and value.startswith("file://"):
                return None
            if isinstance(value, list) and value and isinstance(value[0], str) and not options.get("disableVarExpansion"):
                combinations *= len(value)
        total += combinations * _repeat(options.get("repeat"), repeat)
    return total


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _repeat(value: Any, fallback: int) -> int:
    """promptfoo's normalizeRepeatCount: a positive integer, else the fallback."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**53 else fallback


def _columns(prompts: list[Any], results: list[Mapping[str, Any]]) -> list[tuple[set[str], set[str]]]:
    """Each prompt column's names as promptfoo matches them: (prompt label and id, provider label and id)."""
    columns: list[tuple[set[str], set[str]]] = []
    for item in prompts:
        entry = _object(item)
        columns.append(({str(entry[k]) for k in ("label", "id") if isinstance(entry.get(k), str) and entry[k]},
                        {entry["provider"]} if isinstance(entry.get("provider"), str) and entry["provider"] else set()))
    for result in results:
        provider = _object(result.get("provider"))
        columns[result["promptIdx"]][1].update(v for v in (provider.get("id"), provider.get("label"))
                                               if isinstance(v, str) and v)
    return columns


def _matches(ref: str, names: set[str]) -> bool:
    """promptfoo's doesPromptRefMatch / doesProviderRefMatch on the names it knows of a column."""
    return any(name == ref or (ref.endswith("*") and name.startswith(ref[:-1])) or name.startswith(f"{ref}:")
               for name in names)


def _runs_in(test: Mapping[str, Any], column: tuple[set[str], set[str]]) -> bool:
    """Whether promptfoo ran ``test`` in a prompt column: only a restriction that names none of the column's
    names excludes it (an unnamed column is expected, so a result missing there is never dropped)."""
    for restriction, names in ((test.get("prompts"), column[0]), (test.get("providers"), column[1])):
        if not isinstance(restriction, list) or not names or not all(isinstance(ref, str) for ref in restriction):
            continue
        if not any(_matches(ref, names) for ref in restriction):
            return False
    return True


def _with_reason(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """A result of a promptfoo version before ``failureReason`` with the reason those versions meant."""
    if "failureReason" in result:
        return result
    reason = _NONE if result["success"] else _ASSERT if isinstance(result.get("gradingResult"), dict) else _ERROR
    return {**result, "failureReason": reason}


def _trials(results: list[Mapping[str, Any]]) -> dict[int, tuple[str, int]]:
    """Each test's case and trial: a case's tests (its repeats) in the order promptfoo numbered them, so a
    test's trial does not depend on the order of the results, nor on a result missing for another prompt."""
    cases = {result["testIdx"]: _case(result["testCase"], result["testIdx"]) for result in results}
    ranks: dict[str, int] = {}
    trials: dict[int, tuple[str, int]] = {}
    for test in sorted(cases):
        ranks[cases[test]] = ranks.get(cases[test], 0) + 1
        trials[test] = (cases[test], ranks[cases[test]])
    return trials


def _lost(trials: Mapping[int, tuple[str, int]]) -> str | None:
    """promptfoo numbers the tests it runs 0, 1, 2, ...: a number without a result is a test (a repeat) that
    left none in any prompt, and the case it measured is in that test alone."""
    gaps = sorted(set(range(max(trials, default=-1) + 1)) - set(trials))
    if not gaps:
        return None
    shown = ", ".join(map(str, gaps[:10])) + (f" and {len(gaps) - 10} more" if len(gaps) > 10 else "")
    return (f"test(s) {shown} that promptfoo numbered left no result for any prompt; the case a test measures is "
            "named by the test itself, so it could be any case of the file")


def _check_flags(result: Mapping[str, Any], where: str) -> None:
    """``success`` and ``failureReason`` must agree: a result cannot both pass and have failed."""
    success, reason = result["success"], result["failureReason"]
    if success and reason != _NONE:
        raise inconsistent(TOOL, where, f"it says success with failure reason {reason}", expected="failureReason 0",
                           actual=reason)
    if not success and reason == _NONE:
        raise inconsistent(TOOL, where, "it says not success with failure reason 0 (none)",
                           expected="failureReason 1 or 2", actual=reason)


def _case(test: Mapping[str, Any], index: int) -> str:
    for source in (test.get("vars"), test.get("metadata")):
        if isinstance(source, dict) and isinstance(source.get("case"), str) and source["case"]:
            return str(source["case"])
    description = test.get("description")
    return description if isinstance(description, str) and description else f"test {index}"


def _name(assertion: Mapping[str, Any] | None) -> str | None:
    if not isinstance(assertion, dict):
        return None
    metric = assertion.get("metric")
    return metric if isinstance(metric, str) and metric else str(assertion.get("type"))


def _declared(test: Mapping[str, Any]) -> list[str]:
    def walk(assertions: Any) -> Iterator[str]:
        for assertion in assertions if isinstance(assertions, list) else []:
            name = _name(assertion)
            if name is not None:
                yield name
            if isinstance(assertion, dict) and isinstance(assertion.get("assert"), list):  # assert-set
                yield from walk(assertion["assert"])

    return list(dict.fromkeys(walk(test.get("assert"))))


def _components(grading: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    for component in grading.get("componentResults") or []:
        yield component
        yield from _components(component)


def _outcomes(result: Mapping[str, Any], unit: str, base: Outcome) -> list[Outcome]:
    declared = _declared(result["testCase"])
    if result["failureReason"] == _ERROR:
        why = f"{unit} errored: {result.get('error') or 'no error message'}"
        return [_with(base, name, ERROR, why) for name in declared]
    grading = result.get("gradingResult")
    outcomes: list[Outcome] = []
    produced: set[str] = set()
    for component in _components(grading) if isinstance(grading, dict) else ():
        name = _name(component.get("assertion"))
        if name is None:
            continue
        produced.add(name)
        ok = component["pass"] is True
        reason = component.get("reason")
        outcomes.append(_with(base, name, PASSED if ok else FAILED,
                              None if ok else f"{unit}: {name}: {reason or 'the assertion failed'}"))
    if not result["success"] and all(o.status == PASSED for o in outcomes):
        reason = grading.get("reason") if isinstance(grading, dict) else None
        why = f"{unit} failed as a whole: {reason or result.get('error') or 'below its threshold'}"
        outcomes = [_with(base, name, FAILED, why) for name in dict.fromkeys([*produced, *declared])]
        produced.update(declared)
    for name in declared:
        if name not in produced:
            outcomes.append(_with(base, name, MISSING, f"{unit} has no result for assertion {name}"))
    return outcomes


def _with(base: Outcome, name: str, status: str, message: str | None) -> Outcome:
    return Outcome(name=name, status=status, message=short_message(message), case=base.case,
                   start_ms=base.start_ms, stop_ms=base.stop_ms, unit=base.unit, trial=base.trial)


def _usage(result: Mapping[str, Any], where: str) -> dict[str, int | None]:
    """What the provider reported for this result (promptfoo fills zeros elsewhere; those are not read)."""
    response = result.get("response")
    tokens = response.get("tokenUsage") if isinstance(response, dict) else None
    tokens = tokens if isinstance(tokens, dict) else {}
    cost = response.get("cost") if isinstance(response, dict) else None
    latency = result.get("latencyMs")
    return {
        "input-tokens": counter(tokens.get("prompt"), TOOL, f"{where} tokenUsage.prompt"),
        "output-tokens": counter(tokens.get("completion"), TOOL, f"{where} tokenUsage.completion"),
        "cost-nanodollars": dollars_to_nanodollars(cost, TOOL, f"{where} cost"),
        "duration-ms": round(latency) if isinstance(latency, int | float) and latency < 10**12 else None,
    }
