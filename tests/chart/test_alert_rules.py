"""The PrometheusRule's alerts, evaluated by Prometheus' own promtool.

`promtool check rules` on the rendered rules, and `promtool test rules` on
alerts/hub-follower.test.yml: each alert fires after its `for:` with the documented labels
and annotations, and stays silent in the normal case and the near misses. scripts/test
installs promtool (Debian's prometheus package) as root; without it these tests print
SKIPPED, which fails under CI=true.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

import chartkit

TESTS = Path(__file__).parent / "alerts" / "hub-follower.test.yml"


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    return path


def rules(chart, **rule) -> dict:
    r = chartkit.render(chart, chartkit.hf(metrics={"prometheusRule": {"enabled": True, **rule}}))
    (doc,) = r.kind("PrometheusRule")
    return {"groups": doc["spec"]["groups"]}


def run(promtool: str, *args: str, cwd: Path) -> str:
    out = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_the_rules_pass_promtool_check(chart, promtool, tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules(chart)))
    assert "SUCCESS: 5 rules found" in run(promtool, "check", "rules", "rules.yml", cwd=tmp_path)


def test_every_alert_passes_its_unit_tests(chart, promtool, tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules(chart)))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    assert "SUCCESS" in run(promtool, "test", "rules", TESTS.name, cwd=tmp_path)


def test_every_alert_has_a_firing_and_a_silent_case(chart):
    alerts = {r["alert"] for g in rules(chart)["groups"] for r in g["rules"]}
    cases = [c for t in yaml.safe_load(TESTS.read_text())["tests"] for c in t.get("alert_rule_test", [])]
    for alert in alerts:
        mine = [c for c in cases if c["alertname"] == alert]
        assert any(c["exp_alerts"] for c in mine), f"{alert}: no test where it fires"
        assert any(not c["exp_alerts"] for c in mine), f"{alert}: no test where it stays silent"
        fired = [a for c in mine for a in c["exp_alerts"]]
        assert all(a["exp_annotations"]["runbook_url"].endswith("#" + alert.lower()) for a in fired), alert


@pytest.mark.parametrize(
    "durations",
    [
        {"secondaryHubUnreachable": "9m", "noUsableHub": "4m", "watchDown": "14m"},
        {"secondaryHubUnreachable": "11m", "noUsableHub": "6m", "watchDown": "16m"},
    ],
    ids=["one-minute-shorter", "one-minute-longer"],
)
def test_the_unit_tests_fail_against_a_rule_whose_for_is_off_by_one_evaluation(chart, promtool, tmp_path, durations):
    wrong = rules(chart, **{"for": durations})
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(wrong))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    out = subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    for alert in ("HubFollowerSecondaryHubUnreachable", "HubFollowerNoUsableHub", "HubFollowerWatchDown"):
        assert f"alertname: {alert}" in out.stdout + out.stderr, alert
