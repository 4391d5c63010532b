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
    assert "SUCCESS: 12 rules found" in run(promtool, "check", "rules", "rules.yml", cwd=tmp_path)


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
        {"secondaryHubUnreachable": "9m", "noUsableHub": "4m", "watchDown": "14m", "overrideRefused": "4m",
         "activeHubUnreachable": "0m", "activeHubNotClaiming": "0m", "basisUnconfirmed": "0m", "noClaimSeen": "0m", "switchHeld": "1m", "splitBrain": "0m"},
        {"secondaryHubUnreachable": "11m", "noUsableHub": "6m", "watchDown": "16m", "overrideRefused": "6m",
         "activeHubUnreachable": "2m", "activeHubNotClaiming": "2m", "basisUnconfirmed": "2m", "noClaimSeen": "2m", "switchHeld": "3m", "splitBrain": "2m"},
    ],
    ids=["one-minute-shorter", "one-minute-longer"],
)
def test_the_unit_tests_fail_against_a_rule_whose_for_is_off_by_one_evaluation(chart, promtool, tmp_path, durations):
    wrong = rules(chart, **{"for": durations})
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(wrong))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    out = subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    for alert in ("HubFollowerSecondaryHubUnreachable", "HubFollowerNoUsableHub", "HubFollowerWatchDown", "HubFollowerOverrideRefused",
                  "HubFollowerActiveHubUnreachable", "HubFollowerActiveHubNotClaiming", "HubFollowerBasisUnconfirmed", "HubFollowerNoClaimSeen", "HubFollowerSwitchHeld",
                  "HubFollowerSplitBrain"):
        assert f"alertname: {alert}" in out.stdout + out.stderr, alert


UNREACHABLE = "HubFollowerSecondaryHubUnreachable"
ACTIVE_CLAUSE = "unless\n(kubeslice_worker_hub_active == 1)\n"
PROBES = ("kubeslice_worker_hub_probe_errors_total[", "kubeslice_worker_hub_last_probe_success_timestamp_seconds)")


def by_name(expr: str) -> str:
    """The rule as it was before it selected by role: every hub but the one named primary."""
    for p in PROBES:
        expr = expr.replace(p, p[:-1] + '{hub!="primary"}' + p[-1])
    return expr.replace(ACTIVE_CLAUSE, "")


@pytest.mark.parametrize(
    "change,failing",
    [
        (lambda e: e[: e.index("unless ignoring(kind)")], "a drained secondary unreachable stays silent"),
        (lambda e: e.replace("unless ignoring(kind)", "unless"), "a drained secondary unreachable stays silent"),
        (lambda e: e.replace("> 0)", "> bool 0)"), "a pin of the unreachable secondary, or a drain of another hub, does not silence it"),
        (lambda e: e.replace(ACTIVE_CLAUSE, ""), "the hub the worker is on being unreachable is not this alert"),
        (lambda e: e.replace("== 1)", "== bool 1)"), "worker on the primary, the secondary unreachable since start fires 10m after the condition holds"),
        (lambda e: e.replace(ACTIVE_CLAUSE, ACTIVE_CLAUSE.replace("unless", "unless on(hub)")), "two workers on different hubs, the secondary unreachable from both, fires for the one on the primary only"),
        (by_name, "worker on the secondary, the primary unreachable fires, naming the primary"),
        (lambda e: e.replace(PROBES[0], PROBES[0][:-1] + '{hub="secondary"}['), "a listed hub unreachable since start fires, naming it"),
    ],
    ids=[
        "without-the-drain-clause", "without-ignoring-kind", "drain-gauge-as-bool", "without-the-active-clause",
        "active-gauge-as-bool", "active-matched-on-hub-only", "by-name-not-by-role", "secondary-only",
    ],
)
def test_the_unit_tests_fail_against_a_rule_that_misses_standby_listed_or_drained_hubs(chart, promtool, tmp_path, change, failing):
    wrong = rules(chart)
    (rule,) = [r for g in wrong["groups"] for r in g["rules"] if r.get("alert") == UNREACHABLE]
    changed = change(rule["expr"])
    assert changed != rule["expr"]
    rule["expr"] = changed
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(wrong))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    out = subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert f"name: {failing}," in out.stdout + out.stderr, out.stdout + out.stderr


def test_the_unit_tests_fail_against_a_refusal_alert_on_the_wrong_value(chart, promtool, tmp_path):
    wrong = rules(chart)
    (rule,) = [r for g in wrong["groups"] for r in g["rules"] if r.get("alert") == "HubFollowerOverrideRefused"]
    rule["expr"] = rule["expr"].replace("== 1", ">= 0")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(wrong))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    out = subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "name: nothing refused stays silent," in out.stdout + out.stderr, out.stdout + out.stderr


ACTIVE = "HubFollowerActiveHubUnreachable"
ACTIVE_FILTER = "and\n(kubeslice_worker_hub_active == 1)\n"
HELD_WHYS = 'why=~"unauthenticated|pinned_hub_unreachable|drain_no_alternative"'
NOT_CLAIMING = "HubFollowerActiveHubNotClaiming"
NO_CLAIM = "HubFollowerNoClaimSeen"
UNCONFIRMED = "HubFollowerBasisUnconfirmed"


@pytest.mark.parametrize(
    "alert,change,failing",
    [
        (ACTIVE, lambda e: e.replace(ACTIVE_FILTER, ""), "the worker's hub answering stays silent, with a standby unreachable since start"),
        (ACTIVE, lambda e: e.replace("== 1)", "== bool 1)"), "the worker's hub answering stays silent, with a standby unreachable since start"),
        (ACTIVE, lambda e: e.replace(ACTIVE_FILTER, ACTIVE_FILTER.replace("and", "and on(hub)")), "two workers on different hubs, the primary unreachable from both, fires for the one on the primary only"),
        (ACTIVE, lambda e: e.replace("> 60", ">= 60"), "worker on a primary that never answered fires at 3m"),
        (ACTIVE, lambda e: e.replace("> 60", "> 120"), "worker on a primary that never answered fires at 3m"),
        ("HubFollowerSwitchHeld", lambda e: e.replace(HELD_WHYS, 'why=~"unauthenticated|pinned_hub_unreachable|drain_no_alternative|older_than_basis"'), "older_than_basis and split_brain holds, and nothing held, stay silent"),
        ("HubFollowerSwitchHeld", lambda e: e.replace(HELD_WHYS, 'why!="older_than_basis"'), "older_than_basis and split_brain holds, and nothing held, stay silent"),
        ("HubFollowerSwitchHeld", lambda e: e.replace("== 1", ">= 0"), "older_than_basis and split_brain holds, and nothing held, stay silent"),
        ("HubFollowerSwitchHeld", lambda e: e.replace("|drain_no_alternative", ""), "unauthenticated and drain_no_alternative holds fire at 2m, one alert each"),
        ("HubFollowerSplitBrain", lambda e: e.replace("== 1", ">= 0"), "no split brain stays silent"),
        (NOT_CLAIMING, lambda e: e[: e.index("and")], "a clock that does not run stays silent"),
        (NOT_CLAIMING, lambda e: e.replace("> 60", "> 120", 1), "a controller that stops publishing at 1m fires at 4m"),
        (NOT_CLAIMING, lambda e: e.replace("> 60", ">= 0", 1), "a controller that republishes every minute stays silent"),
        (UNCONFIRMED, lambda e: e[: e.index("and")], "no unbounded hold, the gauge at 0, stays silent"),
        (UNCONFIRMED, lambda e: e.replace("> 180", "> 240", 1), "a hold rule 10 cannot end, from 1m, fires at 6m"),
        (UNCONFIRMED, lambda e: e.replace("> 180", ">= 0", 1), "a hub that claims itself every minute stays silent"),
        (NO_CLAIM, lambda e: e[: e.index("and")], "one hub, the gauge at 0, stays silent"),
        (NO_CLAIM, lambda e: e.replace("> 600", "> 720", 1), "hubs that never show a claim fire 12m after the first round"),
        (NO_CLAIM, lambda e: e.replace("> 600", ">= 0", 1), "a claim every 30s stays silent"),
    ],
    ids=[
        "active-without-the-active-clause", "active-gauge-as-bool", "active-matched-on-hub-only", "stale-at-60-inclusive",
        "stale-too-long", "held-with-older-than-basis", "held-every-why-but-older-than-basis", "held-any-value",
        "held-without-drain-no-alternative", "split-brain-any-value", "not-claiming-without-the-running-clause",
        "not-claiming-too-late", "not-claiming-at-any-age", "unconfirmed-without-the-hold-clause",
        "unconfirmed-too-late", "unconfirmed-at-any-age", "no-claim-without-the-hubs-clause", "no-claim-too-late",
        "no-claim-at-any-age",
    ],
)
def test_the_unit_tests_fail_against_a_wrong_active_held_split_brain_or_not_claiming_rule(chart, promtool, tmp_path, alert, change, failing):
    wrong = rules(chart)
    (rule,) = [r for g in wrong["groups"] for r in g["rules"] if r.get("alert") == alert]
    changed = change(rule["expr"])
    assert changed != rule["expr"]
    rule["expr"] = changed
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(wrong))
    shutil.copy(TESTS, tmp_path / TESTS.name)
    out = subprocess.run([promtool, "test", "rules", TESTS.name], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert f"name: {failing}," in out.stdout + out.stderr, out.stdout + out.stderr
