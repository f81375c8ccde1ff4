"""``testops-evidence verify-attestation`` (CLI): prove later what a run published, from what.

::

    testops-evidence verify-attestation --attestation state/publication.intoto.json --published state/published
    testops-evidence verify-attestation --attestation publication.intoto.json --published .   # a results artifact

Reads the in-toto Statement that ``verify`` wrote (``publication/attestation.py``), re-hashes every subject
— the export receipt, each published result file and (files backend) the publication's manifest — below
``--published``, checks that the predicate's receipt digest is the receipt's, and refuses a directory that holds
anything the statement does not bind (``io.extra_file``): an auditor opens the report page beside the results. It needs no token and no network. The summary shows what the
statement attests: run, commit, contract, selection and receipt digests, backend, launch and counts.
"""

from __future__ import annotations

from pathlib import Path

from testops_evidence import summary
from testops_evidence.errors import input_error
from testops_evidence.publication import attestation
from testops_evidence.runner import PhaseContext, PhaseResult


def run(ctx: PhaseContext) -> PhaseResult:
    given = ctx.settings.extras.get("attestation")
    if not given or not given.strip():
        raise input_error("attestation", "verify-attestation needs --attestation FILE (verify's "
                          "publication.intoto.json)")
    path = Path(given.strip())
    published = ctx.settings.extras.get("published")
    base = Path(published.strip()) if published and published.strip() else path.parent / "published"
    document = attestation.load_statement(path)
    checked = attestation.check_statement(document, base)
    predicate = document["predicate"]
    run_facts = predicate.get("run") if isinstance(predicate.get("run"), dict) else {}
    verified = predicate.get("verified") if isinstance(predicate.get("verified"), dict) else {}
    launch = predicate.get("launch") if isinstance(predicate.get("launch"), dict) else None
    rows = [
        ("campaign", summary.code(predicate.get("campaign"))),
        ("run", summary.code(f"{run_facts.get('repository')} run {run_facts.get('run-id')}, attempt "
                             f"{run_facts.get('run-attempt')}")),
        ("commit", summary.code(predicate.get("commit"))),
        ("contract sha256", summary.code(predicate.get("contract-sha256"))),
        ("selection sha256", summary.code(predicate.get("selection-sha256"))),
        ("receipt sha256", summary.code(predicate.get("receipt-sha256"))),
        ("backend", summary.code(predicate.get("backend"))),
        ("launch", summary.code(launch.get("id")) if launch else "—"),
        ("verified", ", ".join(f"{verified.get(s)} {s}" for s in ("passed", "failed", "broken"))),
        ("files re-hashed", checked),
    ]
    return PhaseResult(headline=f"✅ The attestation holds: {checked} files below {summary.code(base)} hash to the "
                                "digests it names.", summary=summary.table(("", ""), rows))
