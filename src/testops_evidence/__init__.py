"""testops-evidence: fail-closed evaluation campaigns on GitHub Actions, published to Allure TestOps."""

__version__ = "0.2.0"
