#!/usr/bin/env python3
"""Action entrypoint: maps the runner's ``INPUT_*`` variables to the ``testops-evidence`` CLI.

The Docker image and the composite variant start ``python -I entrypoint.py``. The work is in
:mod:`testops_evidence.entrypoint`.
"""

import os
import sys

try:
    from testops_evidence.entrypoint import main
except ModuleNotFoundError:  # running from a checkout (composite variant, tests)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "src"))
    from testops_evidence.entrypoint import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
