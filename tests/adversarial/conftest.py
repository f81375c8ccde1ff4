"""The red team runs the templates under act like the e2e tier: the same act binary and GitHub test server."""

from test_act_e2e import act_binary, github  # noqa: F401 (fixtures shared with tests/test_act_e2e.py)
from test_upload import exported  # noqa: F401 (an export of the small contract, for tests/adversarial/test_exact_sets.py)
