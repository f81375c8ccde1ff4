"""settings: how inputs are resolved (option, INPUT_* in both spellings, env fallbacks, default) and
validated (one input.<name> refusal per bad value, exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_mode
from testops_evidence.errors import EXIT_USAGE, Refusal
from testops_evidence.interface import INPUTS, INPUTS_BY_NAME
from testops_evidence.settings import Settings, default_state_dir, env_input, parse_bool, parse_int


def refusal_of(func: object, *args: object, **kwargs: object) -> Refusal:
    with pytest.raises(Refusal) as caught:
        func(*args, **kwargs)  # type: ignore[operator]
    return caught.value


# --- reading INPUT_* ---------------------------------------------------------------------------------------


def test_env_input_reads_the_hyphen_spelling_the_runner_uses() -> None:
    assert env_input({"INPUT_SELECTION-PATH": "sel.json"}, "selection-path") == "sel.json"


def test_env_input_reads_the_underscore_spelling() -> None:
    assert env_input({"INPUT_SELECTION_PATH": "sel.json"}, "selection-path") == "sel.json"


def test_env_input_prefers_the_hyphen_spelling_when_both_exist() -> None:
    env = {"INPUT_SELECTION-PATH": "hyphen.json", "INPUT_SELECTION_PATH": "underscore.json"}
    assert env_input(env, "selection-path") == "hyphen.json"


@pytest.mark.parametrize("blank", ["", " ", "\n", "\t \n"])
def test_an_empty_input_counts_as_unset(blank: str) -> None:
    # The runner sets every declared input, empty or not; an empty one must fall through.
    assert env_input({"INPUT_CASES": blank}, "cases") is None
    assert env_input({"INPUT_CASES": blank, "INPUT_CASES_": "x"}, "cases") is None
    env = {"INPUT_SELECTION-PATH": blank, "INPUT_SELECTION_PATH": "u.json"}
    assert env_input(env, "selection-path") == "u.json"


def test_values_are_stripped() -> None:
    assert env_input({"INPUT_CASES": "  a,b \n"}, "cases") == "a,b"


# --- resolution order -------------------------------------------------------------------------------------


def test_option_beats_input_beats_env_fallback_beats_default() -> None:
    env = {"INPUT_DEADLINE-SECONDS": "120"}
    assert Settings.resolve("verify", {"deadline-seconds": "60"}, env).integer("deadline-seconds") == 60
    assert Settings.resolve("verify", {}, env).integer("deadline-seconds") == 120
    assert Settings.resolve("verify", {}, {}).integer("deadline-seconds") == 600  # the action default

    endpoint = {"INPUT_TESTOPS-ENDPOINT": "https://input.example", "ALLURE_ENDPOINT": "https://env.example"}
    assert Settings.resolve("upload", {}, endpoint).string("testops-endpoint") == "https://input.example"
    assert Settings.resolve("upload", {}, {"ALLURE_ENDPOINT": "https://env.example"}).string(
        "testops-endpoint") == "https://env.example"
    assert Settings.resolve("upload", {"testops-endpoint": "https://cli.example"}, endpoint).string(
        "testops-endpoint") == "https://cli.example"


def test_sources_say_where_a_value_came_from_never_the_value() -> None:
    env = {"INPUT_CASES": "a", "ALLURE_TOKEN": "tok-secret", "ALLURE_PROJECT_ID": "12"}
    settings = Settings.resolve("select", {"selection-path": "s.json"}, env)
    assert settings.sources["selection-path"] == "option"
    assert settings.sources["cases"] == "input"
    assert settings.sources["testops-token"] == "env ALLURE_TOKEN"
    assert settings.sources["testops-project-id"] == "env ALLURE_PROJECT_ID"
    assert settings.sources["fail-on-failed-cases"] == "default"
    assert "tok-secret" not in repr(settings.sources)


@pytest.mark.parametrize(("variables", "expected"), [
    ({"ALLURE_TOKEN": "a"}, "a"),
    ({"TESTOPS_TOKEN": "t"}, "t"),
    ({"ALLURE_TOKEN": "a", "TESTOPS_TOKEN": "t"}, "a"),  # the documented order
    ({"ALLURE_TOKEN": "", "TESTOPS_TOKEN": "t"}, "t"),  # empty counts as unset here too
    ({"INPUT_TESTOPS-TOKEN": "i", "ALLURE_TOKEN": "a"}, "i"),
    ({"INPUT_TESTOPS_TOKEN": "u"}, "u"),
])
def test_testops_token_fallbacks(variables: dict[str, str], expected: str) -> None:
    assert Settings.resolve("upload", {}, variables).string("testops-token") == expected


def test_github_token_fallbacks_and_the_expression_default_is_never_used_literally() -> None:
    assert Settings.resolve("guard", {}, {"GITHUB_TOKEN": "g"}).string("github-token") == "g"
    assert Settings.resolve("guard", {}, {"GH_TOKEN": "h"}).string("github-token") == "h"
    # action.yml's default is `${{ github.token }}`: outside the runner it must not become a value.
    assert INPUTS_BY_NAME["github-token"].default == "${{ github.token }}"
    assert Settings.resolve("guard", {}, {}).string("github-token") is None


def test_unset_inputs_without_defaults_are_absent() -> None:
    settings = Settings.resolve("select", {}, {})
    assert settings.string("cases") is None
    assert not settings.is_set("cases")
    assert settings.integer("job-run-id") is None
    assert settings.path("standing-plan") is None
    assert settings.path("selection-path") == Path("testops-evidence-selection.json")


def test_extras_keep_command_specific_options() -> None:
    settings = Settings.resolve("rehearse", {"workdir": "w", "report": "never", "examples": None}, {})
    assert settings.extras == {"workdir": "w"}  # report is an input (rehearse and upload), not an extra
    assert settings.string("report") == "never"


def test_unknown_input_names_are_a_programming_error() -> None:
    settings = Settings.resolve("check", {}, {})
    for reader in (settings.string, settings.boolean, settings.integer, settings.path):
        with pytest.raises(KeyError):
            reader("no-such-input")  # type: ignore[operator]


def test_require_names_the_mode() -> None:
    err = refusal_of(Settings.resolve("import", {}, {}).require, "source-run-id")
    assert (err.code, err.exit_code) == ("input.source-run-id", EXIT_USAGE)
    assert "import" in err.message


# --- validators ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "value"), [
    ("true", True), ("TRUE", True), (" yes ", True), ("1", True), ("on", True),
    ("false", False), ("No", False), ("0", False), ("off", False),
])
def test_parse_bool_accepts_the_usual_spellings(raw: str, value: bool) -> None:
    assert parse_bool("dry-run", raw) is value


@pytest.mark.parametrize("raw", ["maybe", "tru", "2", "", "yes please"])
def test_parse_bool_refuses_anything_else_with_the_input_code(raw: str) -> None:
    err = refusal_of(parse_bool, "dry-run", raw)
    assert (err.code, err.exit_code, err.field, err.expected, err.actual) == (
        "input.dry-run", EXIT_USAGE, "dry-run", "true | false", raw)


@pytest.mark.parametrize(("raw", "value"), [("0", 0), ("600", 600), (" 42 ", 42), ("0007", 7)])
def test_parse_int_accepts_whole_numbers(raw: str, value: int) -> None:
    assert parse_int("deadline-seconds", raw) == value


@pytest.mark.parametrize("raw", ["-1", "1.5", "1e3", "ten", "", "+3", "1_000", "12345678901234567", "٣"])
def test_parse_int_refuses_anything_else_with_the_input_code(raw: str) -> None:
    err = refusal_of(parse_int, "deadline-seconds", raw)
    assert (err.code, err.exit_code, err.actual) == ("input.deadline-seconds", EXIT_USAGE, raw)


def test_parse_int_minimum() -> None:
    assert parse_int("deadline-seconds", "5", minimum=5) == 5
    err = refusal_of(parse_int, "deadline-seconds", "4", minimum=5)
    assert (err.code, err.expected) == ("input.deadline-seconds", ">= 5")
    assert Settings.resolve("verify", {"deadline-seconds": "1"}, {}).integer("deadline-seconds", minimum=1) == 1


def test_typed_inputs_of_the_mode_are_validated_when_settings_are_resolved() -> None:
    err = refusal_of(Settings.resolve, "verify", {}, {"INPUT_DEADLINE-SECONDS": "soon"})
    assert (err.code, err.exit_code) == ("input.deadline-seconds", EXIT_USAGE)
    err = refusal_of(Settings.resolve, "bootstrap", {"dry-run": "perhaps"}, {})
    assert err.code == "input.dry-run"
    err = refusal_of(Settings.resolve, "select", {}, {"ALLURE_PROJECT_ID": "twelve"})
    assert err.code == "input.testops-project-id"


def test_typed_inputs_of_other_modes_are_not_validated() -> None:
    # The runner sets every input of action.yml; another mode's input is not this step's business.
    settings = Settings.resolve("export", {}, {"INPUT_DEADLINE-SECONDS": "soon", "INPUT_DRY-RUN": "perhaps"})
    assert settings.string("deadline-seconds") == "soon"
    # A TestOps variable of the job is no business of a phase that never talks to TestOps.
    assert Settings.resolve("pages", {}, {"ALLURE_PROJECT_ID": "twelve"}).string("testops-project-id") == "twelve"


def test_path_refuses_a_nul_byte() -> None:
    err = refusal_of(Settings.resolve("export", {"results-dir": "a\x00b"}, {}).path, "results-dir")
    assert err.code == "input.results-dir"


def test_boolean_of_an_unset_input_is_false() -> None:
    assert Settings.resolve("check", {}, {}).boolean("dry-run") is False


def test_every_input_kind_is_known() -> None:
    assert {spec.kind for spec in INPUTS} <= {"string", "bool", "int", "path", "secret"}
    for spec in INPUTS:
        if spec.kind == "bool" and spec.default:
            parse_bool(spec.name, spec.default)
        if spec.kind == "int" and spec.default:
            parse_int(spec.name, spec.default)


def test_default_state_dir() -> None:
    assert default_state_dir({"RUNNER_TEMP": "/runner/_temp"}) == Path("/runner/_temp/testops-evidence")
    assert default_state_dir({}).parts[-2:] == (".testops-evidence", "state")


# --- through the runner: a bad value is exit 2 with the input's code --------------------------------------


def test_a_bad_boolean_input_is_refused_before_the_phase_runs(tmp_path: Path) -> None:
    run = run_mode("export", tmp_path, {"contract": str(tmp_path / "absent.yml")},
                   {"INPUT_FAIL-ON-FAILED-CASES": "sometimes"})
    assert run.exit_code == EXIT_USAGE
    assert run.outputs == {"error-code": "input.fail-on-failed-cases"}
    failure = run.failure()
    assert failure is not None
    assert (failure["code"], failure["actual"]) == ("input.fail-on-failed-cases", "sometimes")


def test_a_bad_integer_input_is_refused_with_exit_2(tmp_path: Path) -> None:
    run = run_mode("select", tmp_path, {}, {"INPUT_JOB-RUN-ID": "12x"})
    assert run.exit_code == EXIT_USAGE
    assert run.outputs["error-code"] == "input.job-run-id"
    assert "`input.job-run-id`" in run.summary


def test_default_state_dir_in_a_docker_action_avoids_the_unmounted_host_runner_temp(tmp_path: Path) -> None:
    # In a Docker action RUNNER_TEMP names a host folder that the container does not have.
    env = {"RUNNER_TEMP": str(tmp_path / "host-only-temp"), "GITHUB_WORKSPACE": "/github/workspace"}
    chosen = default_state_dir(env)
    assert not str(chosen).startswith(str(tmp_path))
    assert str(chosen).startswith(("/github/runner_temp", "/github/workspace"))
    # outside a container an existing or absent RUNNER_TEMP is used as given
    assert default_state_dir({"RUNNER_TEMP": str(tmp_path)}) == tmp_path / "testops-evidence"
