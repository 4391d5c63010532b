"""Session fixtures: two real hubs (etcd + kube-apiserver each), and a real node on a third
control plane. Each is started once and stopped in every outcome."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kube import REPO, ControlPlane, Hub, Pki

WORK = REPO / "target" / "k8s" / "run"


@pytest.fixture(scope="session")
def workdir() -> Path:
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    return WORK


@pytest.fixture(scope="session")
def pki(workdir: Path) -> Pki:
    """The CA and service-account signer of the worker's own cluster (the node's control plane)."""
    return Pki(workdir / "pki")


@pytest.fixture(scope="session")
def hubs(workdir: Path):
    """Hub A (the primary) and hub B (the secondary): separate API servers, separate etcds, and
    each its own CA and service-account signing key, so a credential of one is refused by the
    other and a test can tell which one the worker used."""
    planes = []
    try:
        for name in ("hub-a", "hub-b"):
            planes.append(ControlPlane(name, workdir / name, Pki(workdir / name / "pki")).start())
        yield tuple(Hub(cp).install() for cp in planes)
    finally:
        for cp in planes:
            cp.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, show the logs of the processes the test used."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)  # fixtures look at rep_call to keep a failure's logs
    if report.when == "call" and report.failed:
        for name in ("follower",):
            f = item.funcargs.get(name)
            if f is not None and hasattr(f, "log"):
                report.sections.append((f"{name} log", f.log()))
