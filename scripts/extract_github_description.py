"""Cut GitHub's REST description down to the answers the GitHub test server gives (tests/data/github-rest/).

The tests validate every answer of tests/servers/github_server.py against GitHub's own description; they never
touch the network, so the parts they need are committed. Run it on the unpacked npm package ``@octokit/openapi``
(GitHub's github/rest-api-description with Octokit's ``x-octokit`` extension)::

    npm pack @octokit/openapi && tar xzf octokit-openapi-*.tgz
    python scripts/extract_github_description.py package

For each plan (api.github.com, and the oldest GitHub Enterprise Server the package carries) it keeps the GET
operations of ``OPERATIONS`` and the writes of ``WRITES`` with their parameters, request bodies and responses, and every component they reach by ``$ref``
(``basic-error`` too: the shape of an answer a route does not document). Examples and descriptions of
operations are dropped (they are most of the size and no validator reads them); schemas are kept whole.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "github-rest"
PLANS = ("api.github.com", "ghes-3.17")
# The REST operations the project calls (src/testops_evidence/github_run.py), which the test server serves.
OPERATIONS = (
    "/repos/{owner}/{repo}",
    "/repos/{owner}/{repo}/actions/runs/{run_id}",
    "/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}",
    "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts",
    "/repos/{owner}/{repo}/actions/runs/{run_id}/attempts/{attempt_number}/jobs",
    "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs",
    "/repos/{owner}/{repo}/actions/artifacts",
    "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}",
    "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}",
    "/repos/{owner}/{repo}/issues/{issue_number}/comments",
)
# The writes of verify's check run and pull-request comment (src/testops_evidence/github_checks.py): their
# request bodies are kept too, so the server's answers and the bodies it accepts are judged by the same text.
WRITES = (
    ("/repos/{owner}/{repo}/check-runs", "post"),
    ("/repos/{owner}/{repo}/check-runs/{check_run_id}", "patch"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "post"),
    ("/repos/{owner}/{repo}/issues/comments/{comment_id}", "patch"),
)
_DROP = {"examples", "example", "x-github", "x-octokit", "externalDocs", "summary"}


def _strip(node: Any, *, names: bool = False) -> Any:
    """``node`` without its examples and extensions; ``names``: its keys are property names, all kept."""
    if isinstance(node, dict):
        return {k: _strip(v, names=k == "properties" and not names) for k, v in node.items()
                if names or k not in _DROP}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def _refs(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            found |= _refs(value)
    elif isinstance(node, list):
        for value in node:
            found |= _refs(value)
    return found


def extract(description: dict[str, Any]) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for path, method in (*((path, "get") for path in OPERATIONS), *WRITES):
        operation = description["paths"][path][method]
        kept = {k: operation[k] for k in ("operationId", "parameters", "requestBody", "responses") if k in operation}
        paths.setdefault(path, {})[method] = _strip(kept)
    components: dict[str, dict[str, Any]] = {}
    pending = _refs(paths) | {"#/components/schemas/basic-error"}
    done: set[str] = set()
    while pending:
        ref = pending.pop()
        done.add(ref)
        _hash, _components, kind, name = ref.split("/")
        node = _strip(description["components"][kind][name])
        components.setdefault(kind, {})[name] = node
        pending |= _refs(node) - done
    info = description["info"]
    return {
        "openapi": description["openapi"],
        "info": {"title": info["title"], "version": info["version"], "license": info["license"],
                 "x-github-plan": info.get("x-github-plan"),
                 "x-extracted-by": "scripts/extract_github_description.py (the operations the project calls)"},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {kind: dict(sorted(items.items())) for kind, items in sorted(components.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("package", type=Path, help="the unpacked @octokit/openapi package (its package.json's folder)")
    args = parser.parse_args(argv)
    version = json.loads((args.package / "package.json").read_text(encoding="utf-8"))["version"]
    OUT.mkdir(parents=True, exist_ok=True)
    for plan in PLANS:
        description = json.loads((args.package / "generated" / f"{plan}.json").read_text(encoding="utf-8"))
        if description["info"]["version"] != version:
            print(f"{plan}.json is version {description['info']['version']}, the package {version}", file=sys.stderr)
            return 1
        target = OUT / f"{plan}.json"
        target.write_text(json.dumps(extract(description), indent=1, sort_keys=False) + "\n", encoding="utf-8")
        print(f"{target.relative_to(ROOT)}: {target.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
