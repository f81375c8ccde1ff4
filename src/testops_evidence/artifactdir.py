"""A downloaded artifact is read from a directory of its own that holds exactly the files its reader binds.

The rule of docs/security.md: a job acts only on bytes bound to a digest that travelled to it out of the
workers' reach, and every artifact goes into a directory of its own that nothing else reads or runs. A worker that
reached the runtime token can re-upload an artifact of its run (upload-artifact v4 ``overwrite: true``) with the
bound file unchanged and more files beside it: re-hashing the bound file alone would not notice. So the reader
refuses the directory when it holds any entry it does not bind (hidden ones included), naming the entry.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection

from testops_evidence.errors import Refusal, input_error
from testops_evidence.settings import Settings

DEFAULT_SELECTION = "testops-evidence-selection.json"


def unexpected_entries(directory: str, allowed: Collection[str]) -> list[str]:
    """The entries of ``directory`` that are not regular files named in ``allowed`` (sorted): any other name,
    and an allowed name that is a directory, a link or anything but a plain file."""
    extra = []
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name not in allowed or not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
                extra.append(entry.name)
    return sorted(extra)


def check_exact(directory: str, allowed: Collection[str], *, code: str, what: str, field: str) -> None:
    """Refuse ``directory`` (``code``) unless every entry in it is a plain file named in ``allowed``.

    A missing directory is refused with the same code: the download step did not put the artifact there."""
    try:
        extra = unexpected_entries(directory, allowed)
    except FileNotFoundError:
        raise Refusal(code, f"{what} {directory} does not exist: download the artifact into it by its id",
                      field=field, expected=sorted(allowed), actual=None) from None
    except NotADirectoryError:
        raise Refusal(code, f"{what} {directory} is not a directory", field=field, expected=sorted(allowed),
                      actual=directory) from None
    if extra:
        shown = ", ".join(extra[:10]) + (f" and {len(extra) - 10} more" if len(extra) > 10 else "")
        raise Refusal(code, f"{what} {directory} holds {len(extra)} entr{'y' if len(extra) == 1 else 'ies'} beyond "
                      f"the files it binds: {shown}. The artifact was replaced or added to after the job that made "
                      "it (a worker can re-upload an artifact of its run); nothing of it was used",
                      field=field, expected=sorted(allowed), actual=extra)


def selection_files(name: str) -> frozenset[str]:
    """The files a selection artifact may hold: the selection, the contract select compiled from it
    (campaign/compiled.py: ``<stem>-contract.json``) and the baseline receipt it binds (``<stem>-baseline-receipt.json``,
    phases/select.py). Each is bound by the selection's digest before a byte of it is used."""
    stem = name[:-5] if name.endswith(".json") else name
    return frozenset({name, f"{stem}-contract.json", f"{stem}-baseline-receipt.json"})


def bind_selection_dir(settings: Settings) -> Settings:
    """With ``selection-dir``: the selection is read from that directory (a ``selection-path`` that is a bare file
    name, its default included, is taken inside it; a path must name a file directly in it), and the
    directory must hold nothing but the selection's files (``selection.extra_file``). Returns the settings the
    phase runs with."""
    directory = settings.path("selection-dir")
    if directory is None:
        return settings
    # The runner sets every declared input, so selection-path usually arrives as its default, a bare file name: a
    # bare name is taken inside the directory; a path must name a file directly in it.
    given = settings.raw.get("selection-path") or DEFAULT_SELECTION
    if "/" not in given and os.sep not in given:
        path = os.path.join(os.fspath(directory), given)
    else:
        path = given
        if "\x00" in path or os.path.dirname(os.path.abspath(path)) != os.path.abspath(directory):
            raise input_error("selection-dir", "with selection-dir, selection-path must name a file directly in "
                              "that directory (or be left empty)", expected=f"{os.fspath(directory)}/<file>",
                              actual=path)
    check_exact(os.fspath(directory), selection_files(os.path.basename(path)), code="selection.extra_file",
                what="the selection directory", field="selection-dir")
    raw = dict(settings.raw, **{"selection-path": path})
    sources = dict(settings.sources, **{"selection-path": "selection-dir"})
    return Settings(settings.mode, raw, sources, settings.extras)
