"""Allure TestOps: the REST client, the `allurectl job-run env` parser, and the pure logic that the
bootstrap and reconcile phases use (diffs and observations). See docs/testops.md."""
