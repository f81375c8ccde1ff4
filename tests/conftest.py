"""Suite-wide fixtures: every TestOps test runs against both server generations of the conformance table.

A test module that starts the TestOps test server (directly, or through ``TestOpsCampaign`` or the fault
worlds) is parametrized with ``testops_generation`` = ``25.4`` and ``current``
(tests/data/testops-conformance.json); every ``TestOpsServer`` it starts without naming a generation
speaks that one. Other modules run once.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import ModuleType

import pytest

from servers import conformance

# What a module's source names when it talks to the TestOps test server.
_SPEAKS_TESTOPS = ("TestOpsServer", "TestOpsCampaign", "reliability.faults", "reliability import faults")


def speaks_testops(module: ModuleType | None) -> bool:
    if module is None:
        return False
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return False
    return any(name in source for name in _SPEAKS_TESTOPS)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "testops_generation" in metafunc.fixturenames and speaks_testops(metafunc.module):
        metafunc.parametrize("testops_generation", conformance.GENERATIONS, indirect=True)


@pytest.fixture(autouse=True)
def testops_generation(request: pytest.FixtureRequest) -> Iterator[str]:
    """The TestOps server generation of this test (the default one outside TestOps modules)."""
    generation = getattr(request, "param", conformance.DEFAULT_GENERATION)
    previous = conformance.DEFAULT_GENERATION
    conformance.DEFAULT_GENERATION = generation
    try:
        yield generation
    finally:
        conformance.DEFAULT_GENERATION = previous


@pytest.fixture(autouse=True)
def github_answers_as_described() -> Iterator[None]:
    """Every answer a GitHub test server gave during the test is what GitHub's REST description promises
    (servers/github_description.py): the suite's flows are the record, the description the judge. Answers a test
    shaped wrong on purpose (``Answer.crafted``) are left out. A server that outlives the test (a wider fixture)
    has each answer judged once, at the end of the test it was given in."""
    from servers.github_server import GitHubServer

    yield
    servers = list(GitHubServer.started)
    GitHubServer.started[:] = [server for server in servers if server.running]
    if not servers:
        return
    from servers import github_description

    wrong = []
    for server in servers:
        with server.lock:
            fresh, server.judged = server.answers[server.judged:], len(server.answers)
        wrong += [line for answer in fresh if not answer.crafted
                  for line in github_description.violations(answer, github_description.plan_of(answer))]
    assert not wrong, "the GitHub test server answered unlike GitHub's description:\n" + "\n".join(wrong[:20])
