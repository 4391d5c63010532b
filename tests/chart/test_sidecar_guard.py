"""charts/hub-follower-post-renderer/sidecar-guard.yaml: the alert that outlives an upgrade
which drops the sidecar (the post-renderer route keeps no post-renderer with the release).
It is a PrometheusRule the CRD accepts, its unit tests pass in promtool and fail against a
rule that looks at any namespace, its runbook section exists, and no release carries it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml

import chartkit
from test_alert_rules import promtool  # noqa: F401 (a fixture)
from test_monitoring import PROMETHEUS_RULE_SCHEMA

GUARD = chartkit.REPO / "charts" / "hub-follower-post-renderer" / "sidecar-guard.yaml"
TESTS = Path(__file__).parent / "alerts" / "sidecar-guard.test.yml"


def guard() -> dict:
    return yaml.safe_load(GUARD.read_text())


def promtool_test(promtool: str, rule: dict, tmp_path: Path) -> subprocess.CompletedProcess:
    (tmp_path / "guard.yml").write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    return subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_the_guard_is_a_prometheus_rule_the_crd_accepts():
    rule = guard()
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    assert rule["metadata"]["namespace"] == chartkit.NAMESPACE
    (alert,) = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert alert["alert"] == "HubFollowerSidecarMissing"
    assert f'namespace="{chartkit.NAMESPACE}"' in alert["expr"]


def test_the_guard_passes_promtool_check_and_its_unit_tests(promtool, tmp_path):
    (tmp_path / "guard.yml").write_text(yaml.safe_dump({"groups": guard()["spec"]["groups"]}))
    out = subprocess.run([promtool, "check", "rules", "guard.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "SUCCESS: 1 rules found" in out.stdout, out.stdout + out.stderr
    out = promtool_test(promtool, guard(), tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("change,failing", [
    (lambda e: e.replace('{namespace="kubeslice-system"}', ""), "a sidecar in another namespace does not keep it silent"),
    (lambda e: e.replace("absent(hub_follower_build_info", "absent(hub_follower_build_info_total"), "a sidecar scraped all along stays silent"),
])
def test_the_unit_tests_fail_against_a_wrong_guard(promtool, tmp_path, change, failing):
    rule = guard()
    (alert,) = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    changed = change(alert["expr"])
    assert changed != alert["expr"]
    alert["expr"] = changed
    out = promtool_test(promtool, rule, tmp_path)
    assert out.returncode != 0
    assert f"name: {failing}," in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_guard_has_its_runbook_and_is_in_no_release():
    runbook = guard()["spec"]["groups"][0]["rules"][0]["annotations"]["runbook_url"]
    assert runbook == "https://github.com/kubeslice/hub-follower/blob/main/docs/runbooks.md#hubfollowersidecarmissing"
    assert "\n## HubFollowerSidecarMissing\n" in chartkit.RUNBOOKS.read_text()
    ignored = (GUARD.parent / ".helmignore").read_text().splitlines()
    assert GUARD.name in ignored, "helm package would carry the guard into the release's chart"
