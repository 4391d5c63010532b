"""The optional PrometheusRule: valid, alerting on the sidecar's real metrics, and
linking to runbooks that exist."""

from __future__ import annotations

import re

import jsonschema
import promql_parser
import pytest

import chartkit

# The metric names the chart may use; tests/image checks them against the binary.
METRICS = chartkit.METRICS
selectors = chartkit.selectors
RESTART_OUTCOMES = {
    "signalled", "killed", "verified", "unverified", "not_found",
    "permission_denied", "gate_failed", "gate_cleared", "observed",
}
ALERTS = {
    "HubFollowerSecondaryHubUnreachable",
    "HubFollowerNoUsableHub",
    "HubFollowerWorkerRestartUnverified",
    "HubFollowerSwitchFlapping",
    "HubFollowerWatchDown",
}

# The parts of the prometheus-operator PrometheusRule CRD (monitoring.coreos.com/v1)
# that these rules use, including its duration pattern.
PROM_DURATION = "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
PROMETHEUS_RULE_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": {
            "type": "object",
            "required": ["name", "namespace"],
            "properties": {"name": {"type": "string", "maxLength": 63}, "labels": STRING_MAP},
        },
        "spec": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "additionalProperties": False,
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": {"type": "string", "pattern": PROM_DURATION},
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["alert", "expr"],
                                    "additionalProperties": False,
                                    "properties": {
                                        "alert": {"type": "string", "minLength": 1},
                                        "expr": {"type": "string", "minLength": 1},
                                        "for": {"type": "string", "pattern": PROM_DURATION},
                                        "keep_firing_for": {"type": "string", "pattern": PROM_DURATION},
                                        "labels": STRING_MAP,
                                        "annotations": STRING_MAP,
                                    },
                                },
                            },
                        },
                    },
                }
            },
        },
    },
}


def rules(rendered):
    (rule,) = rendered.kind("PrometheusRule")
    return rule, {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


@pytest.fixture(scope="module")
def rendered(chart):
    return chartkit.render(
        chart,
        chartkit.hf(
            metrics={
                "prometheusRule": {
                    "enabled": True,
                    "labels": {"release": "kube-prometheus-stack"},
                    "alertLabels": {"team": "platform"},
                }
            }
        ),
    )


def test_no_rule_unless_asked(chart):
    assert chartkit.render(chart).kind("PrometheusRule") == []
    off = chartkit.render(chart, chartkit.hf(enabled=False, metrics={"prometheusRule": {"enabled": True}}))
    assert off.kind("PrometheusRule") == []


def test_no_rule_in_single_hub_mode(chart):
    # Single-hub mode never probes: last_probe_success stays 0, so HubFollowerNoUsableHub
    # would fire on a healthy sidecar, and with one hub nothing else can happen.
    asked = {"prometheusRule": {"enabled": True}}
    two = chartkit.render(chart, chartkit.hf(metrics=asked))
    assert len(two.kind("PrometheusRule")) == 1
    one = chartkit.render(chart, chartkit.hf(metrics=asked, secondary={"endpoint": "", "secretName": ""}))
    assert one.kind("PrometheusRule") == []
    assert [d["kind"] for d in one.docs] == ["Deployment", "Role", "RoleBinding"]
    assert "No PrometheusRule is rendered" in one.notes


def test_rule_matches_the_crd_schema(rendered):
    rule, _ = rules(rendered)
    jsonschema.validate(rule, PROMETHEUS_RULE_SCHEMA)
    assert rule["metadata"]["namespace"] == chartkit.NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_the_five_alerts_are_there(rendered):
    _, alerts = rules(rendered)
    assert set(alerts) == ALERTS
    assert alerts["HubFollowerSecondaryHubUnreachable"]["for"] == "10m"
    assert alerts["HubFollowerNoUsableHub"]["labels"]["severity"] == "critical"
    # Polling still follows a failover without the watch: never more than a warning.
    assert alerts["HubFollowerWatchDown"]["labels"]["severity"] == "warning"
    assert alerts["HubFollowerWatchDown"]["for"] == "15m"
    for alert in alerts.values():
        assert alert["labels"]["severity"] in {"warning", "critical"}
        assert alert["labels"]["team"] == "platform"
        assert alert["annotations"]["summary"]


def nodes(tree, kind) -> list:
    found = []
    promql_parser.walk(tree, lambda node: found.append(node) if isinstance(node, kind) else None)
    return found


def test_alerts_are_valid_promql_on_exported_metrics_and_labels(rendered):
    _, alerts = rules(rendered)
    for name, alert in alerts.items():
        used = selectors(alert["expr"])
        assert used, name
        for metric, matchers in used:
            assert metric in METRICS, (name, metric)
            if "hub" in matchers:
                assert matchers["hub"] in {("Equal", "primary"), ("Equal", "secondary")}, name
            if "outcome" in matchers:
                op, value = matchers["outcome"]
                assert op == "Re" and set(value.split("|")) <= RESTART_OUTCOMES, name
    secondary = selectors(alerts["HubFollowerSecondaryHubUnreachable"]["expr"])
    assert all(m.get("hub") == ("Equal", "secondary") for _, m in secondary)
    (restarts,) = selectors(alerts["HubFollowerWorkerRestartUnverified"]["expr"])
    assert "unverified" in restarts[1]["outcome"][1].split("|")
    assert [m for m, _ in selectors(alerts["HubFollowerSwitchFlapping"]["expr"])] == ["kubeslice_worker_hub_switches_total"]


def test_watch_alert_needs_a_watch_down_on_a_hub_that_answers(rendered):
    _, alerts = rules(rendered)
    expr = alerts["HubFollowerWatchDown"]["expr"]
    tree = promql_parser.parse(expr)
    # (watch_up == 0) and (time() - last_probe_success < STALE): a hub that is down
    # altogether is HubFollowerSecondaryHubUnreachable's or HubFollowerNoUsableHub's.
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == "and"
    left, right = ([n.name for n in nodes(side, promql_parser.VectorSelector)] for side in (tree.lhs, tree.rhs))
    assert left == ["kubeslice_worker_hub_watch_up"]
    assert right == ["kubeslice_worker_hub_last_probe_success_timestamp_seconds"]
    assert "== 0" in expr and "< 60" in expr
    # One-to-one `and`: both series carry `hub` and nothing else of hub-follower's.
    assert "on(" not in expr.replace(" ", "") and "ignoring(" not in expr.replace(" ", "")


def test_watch_alert_only_with_the_watch_on(chart):
    off = chartkit.render(
        chart, chartkit.hf(watch={"enabled": False}, metrics={"prometheusRule": {"enabled": True}})
    )
    _, alerts = rules(off)
    # watch_up is exported as 0 with the watch off; the alert would always fire.
    assert set(alerts) == ALERTS - {"HubFollowerWatchDown"}


def test_promql_check_catches_a_broken_expression():
    with pytest.raises(ValueError):
        selectors("sum(rate(kubeslice_worker_hub_switches_total[1h])")


def test_windows_follow_the_poll_interval(chart):
    slow = chartkit.render(
        chart, chartkit.hf(pollInterval="1m", probeTimeout="10s", metrics={"prometheusRule": {"enabled": True}})
    )
    _, alerts = rules(slow)
    expr = alerts["HubFollowerSecondaryHubUnreachable"]["expr"]
    # Three polls of "recent", six polls of rate window.
    assert "[360s]" in expr and "< 180" in expr
    selectors(expr)


def test_runbook_links_resolve_to_docs_sections(rendered):
    _, alerts = rules(rendered)
    headings = {
        re.sub(r"[^a-z0-9 -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
        for line in chartkit.DOCS.read_text().splitlines()
        if line.startswith("#")
    }
    for name, alert in alerts.items():
        url = alert["annotations"]["runbook_url"]
        base, _, anchor = url.partition("#")
        assert base.endswith("docs/helm.md"), url
        assert anchor == name.lower() and anchor in headings, (name, url)
