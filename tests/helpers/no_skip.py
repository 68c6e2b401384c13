"""pytest plugin: where DPTRAIN_NO_SKIP=1 (CI sets it), a test that skips fails instead.

CI provides everything this suite needs (root, Slurm, sshd, network namespaces, a host name
that resolves), so a skip there means something CI should have had is missing: a green CI
run then means every selected test ran. Elsewhere (a laptop, a non-root user) skips stay
skips, each with its reason in pytest's summary.
"""
from __future__ import annotations

import os

import pytest

NO_SKIP_VAR = "DPTRAIN_NO_SKIP"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Turn a skip (marker, fixture or test body) into a failure that keeps its reason."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and os.environ.get(NO_SKIP_VAR) == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"skipped where {NO_SKIP_VAR}=1 (CI must run every test): "
                           f"{reason}")
