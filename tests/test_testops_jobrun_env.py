"""`allurectl job-run env` parsing: both separators, caps, duplicates, ids, and the token never kept."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from testops_evidence.errors import Refusal
from testops_evidence.testops.jobrun_env import MAX_BYTES, parse_job_run_env

TOKEN = "SENTINEL-allure-token-77c1"

ALLURECTL_OUTPUT = f"""ALLURE_ENDPOINT=https://acme.testops.cloud
ALLURE_LAUNCH_ID=4411
ALLURE_RESULTS=allure-results
ALLURE_JOB_RUN_ID=9001
ALLURE_LAUNCH_TAGS=nightly,agents
ALLURE_TOKEN={TOKEN}
ALLURE_TESTPLAN_PATH=./testplan.json
ALLURE_LAUNCH_NAME=Agent protocol evals #17
ALLURE_JOB_RUN_URL=https://acme.testops.cloud/jobrun/9001
ALLURE_LAUNCH_URL=https://acme.testops.cloud/launch/4411
ALLURE_PROJECT_ID=12
"""


def test_parses_allurectl_output() -> None:
    env = parse_job_run_env(ALLURECTL_OUTPUT)
    assert (env.job_run_id, env.launch_id, env.project_id) == (9001, 4411, 12)
    assert env.endpoint == "https://acme.testops.cloud"
    assert env.launch_url == "https://acme.testops.cloud/launch/4411"
    assert env.job_run_url == "https://acme.testops.cloud/jobrun/9001"
    assert env.variables["ALLURE_LAUNCH_NAME"] == "Agent protocol evals #17"
    assert env.token_seen and "ALLURE_TOKEN" not in env.variables
    assert TOKEN not in repr(env)


def test_parses_the_spaced_form_comments_and_crlf() -> None:
    env = parse_job_run_env(b"# from allurectl\r\nALLURE_JOB_RUN_ID = 12\r\n\r\nexport ALLURE_LAUNCH_ID = 34\r\n")
    assert (env.job_run_id, env.launch_id) == (12, 34)
    assert not env.token_seen


def test_value_may_contain_equals_signs() -> None:
    assert parse_job_run_env("ALLURE_LAUNCH_NAME=a=b\n").variables["ALLURE_LAUNCH_NAME"] == "a=b"


@pytest.mark.parametrize("text,field", [
    ("ALLURE_JOB_RUN_ID=1\nALLURE_JOB_RUN_ID=2\n", "ALLURE_JOB_RUN_ID"),
    ("ALLURE_JOB_RUN_ID=1\nALLURE_JOB_RUN_ID = 1\n", "ALLURE_JOB_RUN_ID"),
    ("ALLURE_JOB_RUN_ID=0\n", "ALLURE_JOB_RUN_ID"),
    ("ALLURE_LAUNCH_ID=-3\n", "ALLURE_LAUNCH_ID"),
    ("ALLURE_LAUNCH_ID=12abc\n", "ALLURE_LAUNCH_ID"),
    ("ALLURE_PROJECT_ID=\n", "ALLURE_PROJECT_ID"),
    ("ALLURE_JOB_RUN_ID=1\ngarbage line\n", "line 2"),
    ("allure_lower=1\n", "line 1"),
    ("ALLURE_LAUNCH_NAME=a\x1bb\n", "line 1"),
])
def test_refusals_name_the_field(text: str, field: str) -> None:
    with pytest.raises(Refusal) as info:
        parse_job_run_env(text)
    assert info.value.code == "selection.job_run_env" and info.value.exit_code == 2
    assert info.value.field == field


def test_duplicate_token_lines_are_refused_without_echoing_the_token() -> None:
    with pytest.raises(Refusal) as info:
        parse_job_run_env(f"ALLURE_TOKEN={TOKEN}\nALLURE_TOKEN={TOKEN}\n")
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value.to_json())


def test_a_malformed_line_is_never_echoed() -> None:
    with pytest.raises(Refusal) as info:
        parse_job_run_env(f"token: {TOKEN}\n")
    assert TOKEN not in str(info.value)


def test_size_cap_and_encoding() -> None:
    with pytest.raises(Refusal) as info:
        parse_job_run_env(b"A=" + b"x" * MAX_BYTES)
    assert info.value.field == "size"
    with pytest.raises(Refusal) as info:
        parse_job_run_env(b"A=\xff\n")
    assert info.value.field == "encoding"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=400),
                 st.text(alphabet=st.sampled_from("AL_RUEJOBNID= \t\n#x19-0\x00é"), max_size=200)))
def test_only_results_or_job_run_env_refusals_come_out(data: bytes | str) -> None:
    try:
        env = parse_job_run_env(data)
    except Refusal as refusal:
        assert refusal.code == "selection.job_run_env"
        return
    for name in ("ALLURE_JOB_RUN_ID", "ALLURE_LAUNCH_ID", "ALLURE_PROJECT_ID"):
        value = env.variables.get(name)
        assert value is None or (value.isdigit() and int(value) > 0)
    assert "ALLURE_TOKEN" not in env.variables


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,20}", fullmatch=True),
                       st.from_regex(r"[!-~][ -~]{0,30}", fullmatch=True).filter(lambda v: not v.endswith(" ")),
                       max_size=10),
       st.booleans())
def test_round_trip_of_well_formed_output(values: dict[str, str], spaced: bool) -> None:
    values = {k: v for k, v in values.items() if k not in ("ALLURE_JOB_RUN_ID", "ALLURE_LAUNCH_ID",
                                                          "ALLURE_PROJECT_ID", "ALLURE_TOKEN", "EXPORT")}
    separator = " = " if spaced else "="
    text = "".join(f"{k}{separator}{v}\n" for k, v in values.items())
    assert dict(parse_job_run_env(text).variables) == values
