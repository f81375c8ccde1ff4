"""The error registry: code form, families, exit codes, and that every refusal in src/ uses a registered code."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

from testops_evidence import errors
from testops_evidence.errors import (
    EXIT_ADVICE,
    EXIT_INTEGRITY,
    EXIT_MEANINGS,
    EXIT_REMOTE,
    EXIT_USAGE,
    REGISTRY,
    Refusal,
    binding,
    input_error,
    is_registered,
    lookup,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "testops_evidence"
ENTRYPOINT = Path(__file__).resolve().parents[1] / "entrypoint.py"

CODE_RE = re.compile(r"^[a-z][a-z_]*\.[a-z0-9_]+$")
# Families: the last part is filled in at run time. These are the only documented ones.
FAMILIES = {"input.<name>": "input.", "testops.http_<status>": "testops.http_", "github.http_<status>": "github.http_"}

# Exit codes the design card fixes (design.md, "Errors and exit codes" and its starting list).
DESIGN_EXIT_CODES = {
    "input.<name>": EXIT_USAGE,
    "contract.invalid": EXIT_USAGE,
    "contract.unknown_case": EXIT_USAGE,
    **{f"guard.{r}": EXIT_INTEGRITY for r in ("event_file", "event", "repository", "visibility", "branch",
                                              "workflow", "run_attempt", "actor", "run_mismatch", "local_context")},
    **{f"selection.{r}": EXIT_INTEGRITY for r in ("job_run_binding", "job_binding", "launch_binding",
                                                  "plan_binding", "foreign_case", "duplicate_case", "empty",
                                                  "digest", "matrix_too_large")},
    "worker.token_present": EXIT_INTEGRITY,
    "export.cell_binding": EXIT_INTEGRITY,
    "export.check_binding": EXIT_INTEGRITY,
    "export.unsupported_pass": EXIT_INTEGRITY,
    "upload.already_started": EXIT_INTEGRITY,
    "verify.duplicate": EXIT_INTEGRITY,
    "verify.mismatch": EXIT_INTEGRITY,
    "verify.missing": EXIT_REMOTE,  # not visible before the deadline: a remote failure, retryable
    **{f"import.{r}": EXIT_INTEGRITY for r in ("foreign_workflow", "rerun", "digest", "unsafe_archive", "host",
                                               "definition", "not_selected", "changed_measurement")},
    "ledger.locked": EXIT_REMOTE,
    "io.unsafe_path": EXIT_INTEGRITY,
    "io.too_large": EXIT_INTEGRITY,
    "io.exists": EXIT_INTEGRITY,
    **{f"testops.{r}": EXIT_REMOTE for r in ("auth", "http_<status>", "transport", "response_invalid",
                                             "response_too_large", "uncertain")},
    "github.http_<status>": EXIT_REMOTE,
    "github.transport": EXIT_REMOTE,
}

# Whole areas with one meaning. A code that breaks its area's rule must be listed as an exception here,
# on purpose (for example a remote area's configuration error is a usage error).
AREA_EXIT_CODES = {"input": EXIT_USAGE, "mode": EXIT_USAGE, "contract": EXIT_USAGE,
                   "testops": EXIT_REMOTE, "github": EXIT_REMOTE}
AREA_EXCEPTIONS = {"testops.not_configured"}


def test_every_registered_code_has_the_area_reason_form_or_is_a_documented_family() -> None:
    for code, spec in REGISTRY.items():
        assert spec.code == code
        assert CODE_RE.match(code) or code in FAMILIES, f"{code} is not <area>.<reason> (snake_case reason)"


def test_the_design_card_codes_are_registered_with_their_exit_codes() -> None:
    for code, exit_code in DESIGN_EXIT_CODES.items():
        assert code in REGISTRY, f"design code {code} is not registered"
        assert REGISTRY[code].exit_code == exit_code, code


def test_exit_codes_follow_the_design_table_by_area() -> None:
    for code, spec in REGISTRY.items():
        assert spec.exit_code in (EXIT_USAGE, EXIT_INTEGRITY, EXIT_REMOTE), code
        area = code.split(".", 1)[0]
        if area in AREA_EXIT_CODES and code not in AREA_EXCEPTIONS:
            assert spec.exit_code == AREA_EXIT_CODES[area], (
                f"{code} exits {spec.exit_code}, but {area}.* codes exit {AREA_EXIT_CODES[area]}; "
                "if that is on purpose, add it to AREA_EXCEPTIONS")


def test_every_meaning_and_hint_is_one_human_line() -> None:
    for code, spec in REGISTRY.items():
        assert spec.meaning.strip(), code
        assert "\n" not in spec.meaning and "\n" not in spec.hint and "\n" not in spec.cause, code


def test_every_code_has_a_usual_cause_and_a_specific_next_step() -> None:
    # docs/troubleshooting.md is built from these; a refusal must always say what to do next, in words that
    # belong to its code, not the generic advice of its exit code.
    generic = {advice.casefold() for advice in EXIT_ADVICE.values()}
    for code, spec in REGISTRY.items():
        assert len(spec.cause.strip()) >= 15, f"{code} has no usual cause"
        assert len(spec.hint.strip()) >= 15, f"{code} has no next step"
        assert spec.hint.strip() not in ("—", "-") and spec.hint.casefold() not in generic, code
        assert spec.hint.rstrip().endswith((".", ")")) and spec.cause.rstrip().endswith((".", ")")), code


def test_exit_meanings_cover_every_exit_code() -> None:
    assert sorted(EXIT_MEANINGS) == [0, 1, 2, 3, 4]
    for spec in REGISTRY.values():
        assert spec.exit_code in EXIT_MEANINGS


def test_no_code_is_registered_twice() -> None:
    # REGISTRY is built with dict(): a second _spec("x", ...) would silently replace the first.
    source = (SRC / "codes.py").read_text()
    counts = Counter(re.findall(r'_spec\(\s*"([^"]+)"', source))
    assert {code for code, n in counts.items() if n > 1} == set()
    assert set(counts) == set(REGISTRY)


@pytest.mark.parametrize(("code", "family"), [
    ("testops.http_503", "testops.http_<status>"),
    ("testops.http_429", "testops.http_<status>"),
    ("github.http_404", "github.http_<status>"),
    ("input.x", "input.<name>"),
    ("input.selection-path", "input.<name>"),
    ("input.fail-on-failed-cases", "input.<name>"),
])
def test_families_resolve(code: str, family: str) -> None:
    assert lookup(code) is REGISTRY[family]
    assert is_registered(code)
    refusal = Refusal(code, "m")
    assert refusal.exit_code == REGISTRY[family].exit_code


@pytest.mark.parametrize("code", [
    "testops.http_", "testops.http_abc", "github.http_5x", "input.", "input.Bad Name", "nope.code",
    "guard.branchx", "guard", "", "testops.http_503.x",
])
def test_unregistered_codes_do_not_resolve(code: str) -> None:
    with pytest.raises(KeyError):
        lookup(code)
    assert not is_registered(code)
    with pytest.raises(KeyError):
        Refusal(code, "m")


def test_family_templates_are_not_codes_themselves() -> None:
    for template in FAMILIES:
        assert not is_registered(template)


def test_refusal_carries_code_fields_and_hint() -> None:
    refusal = Refusal("guard.run_attempt", "attempt 2 is a re-run", field="run-attempt", expected=1, actual=2)
    assert refusal.exit_code == EXIT_INTEGRITY
    assert refusal.hint == REGISTRY["guard.run_attempt"].hint
    assert str(refusal) == "guard.run_attempt: attempt 2 is a re-run (field run-attempt: expected 1, actual 2)"
    assert refusal.to_json() == {
        "code": "guard.run_attempt", "message": "attempt 2 is a re-run", "exit-code": 3,
        "field": "run-attempt", "expected": 1, "actual": 2, "hint": REGISTRY["guard.run_attempt"].hint,
    }
    plain = Refusal("testops.http_502", "bad gateway", http_status=502, hint="")
    assert plain.to_json() == {"code": "testops.http_502", "message": "bad gateway", "exit-code": 4,
                               "http-status": 502}
    assert str(plain) == "testops.http_502: bad gateway"


def test_binding_and_input_error_helpers() -> None:
    binding("selection.digest", "selection-sha256", "a" * 64, "a" * 64)  # equal: no refusal
    with pytest.raises(Refusal) as caught:
        binding("selection.digest", "selection-sha256", "a" * 64, "b" * 64)
    assert (caught.value.code, caught.value.field, caught.value.actual) == ("selection.digest", "selection-sha256",
                                                                            "b" * 64)
    err = input_error("deadline-seconds", "must be a number", expected="digits", actual="soon")
    assert (err.code, err.exit_code, err.field, err.actual) == ("input.deadline-seconds", 2, "deadline-seconds",
                                                                "soon")
    assert input_error("mode", "required").field is None


# --- every refusal in the source uses a registered code ---------------------------------------------------


def _source_files() -> list[Path]:
    return [*sorted(SRC.rglob("*.py")), ENTRYPOINT]


def _code_arguments(tree: ast.AST) -> list[tuple[int, ast.expr]]:
    """Expressions passed as an error code: first argument of Refusal/binding, or a `code=` keyword or
    parameter default."""
    found: list[tuple[int, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("Refusal", "binding") and node.args:
                found.append((node.lineno, node.args[0]))
            found.extend((node.lineno, kw.value) for kw in node.keywords if kw.arg == "code")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True):
                if arg.arg == "code":
                    found.append((node.lineno, default))
            for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
                if arg.arg == "code" and kw_default is not None:
                    found.append((node.lineno, kw_default))
    return found


def test_every_refusal_in_src_uses_a_registered_code() -> None:
    problems = []
    literal_count = 0
    for path in _source_files():
        tree = ast.parse(path.read_text(), filename=str(path))
        for lineno, expr in _code_arguments(tree):
            where = f"{path.relative_to(SRC.parents[1])}:{lineno}"
            if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
                literal_count += 1
                if not is_registered(expr.value):
                    problems.append(f"{where}: {expr.value!r} is not in errors.REGISTRY")
            elif isinstance(expr, ast.JoinedStr):
                head = expr.values[0] if expr.values else None
                prefix = head.value if isinstance(head, ast.Constant) and isinstance(head.value, str) else ""
                if prefix not in FAMILIES.values():
                    problems.append(f"{where}: f-string code starting {prefix!r} is not a documented family")
    assert problems == []
    assert literal_count >= 20  # the scan really found the refusals (guards against a broken walker)


def test_the_scanner_catches_an_unregistered_code() -> None:
    tree = ast.parse('def f(code="guard.nope"):\n    raise Refusal("io.nope", "m")\nbinding(f"x.{y}", 1, 2, 3)\n')
    exprs = [e for _, e in _code_arguments(tree)]
    literals = sorted(e.value for e in exprs if isinstance(e, ast.Constant))
    assert literals == ["guard.nope", "io.nope"]
    assert any(isinstance(e, ast.JoinedStr) for e in exprs)


def test_registry_module_exposes_exit_constants() -> None:
    assert (errors.EXIT_OK, errors.EXIT_CASES_FAILED, EXIT_USAGE, EXIT_INTEGRITY, EXIT_REMOTE) == (0, 1, 2, 3, 4)
