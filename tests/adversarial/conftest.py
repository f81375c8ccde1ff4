"""The red team runs the templates under act like the e2e tier: the same act binary and GitHub test server."""

from test_act_e2e import act_binary, github  # noqa: F401 (fixtures shared with tests/test_act_e2e.py)
