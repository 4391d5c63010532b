"""The optional PrometheusRule: valid, alerting on the sidecar's real metrics, and
linking to runbooks that exist."""

from __future__ import annotations

import re

import jsonschema
import promql_parser
import pytest
import yaml

import chartkit

# The metric names the chart may use; tests/image checks them against the binary.
METRICS = chartkit.METRICS
selectors = chartkit.selectors
# The `outcome` label's values, read from the code that defines them (src/metrics.rs).
RESTART_OUTCOMES = set(re.findall(r'Outcome::\w+ => "(\w+)"', (chartkit.REPO / "src/metrics.rs").read_text()))
assert {"unverified", "unkillable", "requested"} <= RESTART_OUTCOMES, RESTART_OUTCOMES
ALERTS = {
    "HubFollowerSecondaryHubUnreachable",
    "HubFollowerNoUsableHub",
    "HubFollowerWorkerRestartUnverified",
    "HubFollowerSwitchFlapping",
    "HubFollowerWatchDown",
    "HubFollowerOverrideRefused",
    "HubFollowerActiveHubUnreachable",
    "HubFollowerActiveHubNotClaiming",
    "HubFollowerBasisUnconfirmed",
    "HubFollowerNoClaimSeen",
    "HubFollowerSwitchHeld",
    "HubFollowerSplitBrain",
}
# kubeslice_worker_hub_switch_held's `why`s, every one pre-created; HubFollowerSwitchHeld
# is about the ones that need an operator.
HELD_WHYS = {"older_than_basis", "unauthenticated", "pinned_hub_unreachable", "drain_no_alternative", "split_brain"}
ALERTED_WHYS = {"unauthenticated", "pinned_hub_unreachable", "drain_no_alternative"}

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


def test_the_twelve_alerts_are_there(rendered):
    _, alerts = rules(rendered)
    assert set(alerts) == ALERTS
    assert len(ALERTS) == 12
    assert alerts["HubFollowerBasisUnconfirmed"]["for"] == "1m"
    assert alerts["HubFollowerBasisUnconfirmed"]["labels"]["severity"] == "critical"
    assert "> 180\n" in alerts["HubFollowerBasisUnconfirmed"]["expr"]
    assert alerts["HubFollowerNoClaimSeen"]["for"] == "1m"
    assert alerts["HubFollowerNoClaimSeen"]["labels"]["severity"] == "critical"
    assert alerts["HubFollowerActiveHubNotClaiming"]["for"] == "1m"
    assert alerts["HubFollowerActiveHubNotClaiming"]["labels"]["severity"] == "critical"
    assert alerts["HubFollowerActiveHubUnreachable"]["for"] == "1m"
    assert alerts["HubFollowerActiveHubUnreachable"]["labels"]["severity"] == "critical"
    assert alerts["HubFollowerSwitchHeld"]["for"] == "2m"
    assert alerts["HubFollowerSwitchHeld"]["labels"]["severity"] == "warning"
    assert alerts["HubFollowerSplitBrain"]["for"] == "1m"
    assert alerts["HubFollowerSplitBrain"]["labels"]["severity"] == "critical"
    assert alerts["HubFollowerSecondaryHubUnreachable"]["for"] == "10m"
    assert alerts["HubFollowerOverrideRefused"]["for"] == "5m"
    assert alerts["HubFollowerOverrideRefused"]["labels"]["severity"] == "warning"
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
            if "kind" in matchers:
                assert matchers["kind"] in {("Equal", "pin"), ("Equal", "drain")}, name
            if "outcome" in matchers:
                op, value = matchers["outcome"]
                assert op == "Re" and set(value.split("|")) <= RESTART_OUTCOMES, name
            if "why" in matchers:
                op, value = matchers["why"]
                assert op == "Re" and set(value.split("|")) <= HELD_WHYS, name
    # The unreachable alert selects hubs by role (the active gauge), never by name.
    unreachable = selectors(alerts["HubFollowerSecondaryHubUnreachable"]["expr"])
    assert unreachable == [
        ("kubeslice_worker_hub_probe_errors_total", {}),
        ("kubeslice_worker_hub_last_probe_success_timestamp_seconds", {}),
        ("kubeslice_worker_hub_active", {}),
        ("kubeslice_worker_hub_override_until_timestamp_seconds", {"kind": ("Equal", "drain")}),
    ]
    assert selectors(alerts["HubFollowerOverrideRefused"]["expr"]) == [("kubeslice_worker_hub_override_refused", {})]
    (restarts,) = selectors(alerts["HubFollowerWorkerRestartUnverified"]["expr"])
    assert "unverified" in restarts[1]["outcome"][1].split("|")
    assert [m for m, _ in selectors(alerts["HubFollowerSwitchFlapping"]["expr"])] == ["kubeslice_worker_hub_switches_total"]


def filter_on(tree, op: str, metric: str, value: float) -> None:
    """tree is `metric <op> value` (in parentheses or not), a filter, not `<op> bool`."""
    tree = tree.expr if isinstance(tree, promql_parser.ParenExpr) else tree
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == op, tree
    assert tree.modifier is None or not tree.modifier.return_bool
    assert isinstance(tree.lhs, promql_parser.VectorSelector) and tree.lhs.name == metric
    assert isinstance(tree.rhs, promql_parser.NumberLiteral) and tree.rhs.val == value


def test_active_hub_alert_is_about_the_hub_the_worker_is_on(rendered):
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerActiveHubUnreachable"]
    tree = promql_parser.parse(alert["expr"])
    # (time() - last_probe_success > STALE) and (active == 1): a plain one-to-one `and`,
    # matched on `hub` and the target labels, which both series have.
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == "and"
    matching = tree.modifier.matching if tree.modifier else None
    assert matching is None or (str(matching.type).endswith("Exclude") and not list(matching.labels))
    filter_on(tree.rhs, "==", "kubeslice_worker_hub_active", 1)
    assert [n.name for n in nodes(tree.lhs, promql_parser.VectorSelector)] == [
        "kubeslice_worker_hub_last_probe_success_timestamp_seconds"
    ]
    # A timestamp of 0 (never succeeded) is old, so it counts.
    assert alert["expr"].startswith("(time() - kubeslice_worker_hub_last_probe_success_timestamp_seconds) > 60\n")
    assert "{{ $labels.hub }}" in alert["annotations"]["summary"]
    assert "in the last 60s, and that has held for 1m." in alert["annotations"]["description"]
    assert "deadHubAfter (3m)" in alert["annotations"]["description"]
    assert alert["annotations"]["runbook_url"].endswith("#hubfolloweractivehubunreachable")


def seconds(duration: str) -> int:
    unit = {"s": 1, "m": 60, "h": 3600}
    return sum(int(n) * unit[u] for n, u in re.findall(r"([0-9]+)(h|m|s)", duration))


def test_active_hub_alert_fires_before_the_dead_hub_bound_at_the_defaults(rendered):
    # Stale 60s after the last successful probe, seen at most one evaluation later (30s,
    # the Prometheus Operator's default evaluationInterval), then `for` 1m: 2m30s at the
    # latest, before deadHubAfter (counted from the first failed read, after that
    # probe) lets a claim that is not fresher move the worker.
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerActiveHubUnreachable"]
    stale = int(re.search(r"> ([0-9]+)\n", alert["expr"]).group(1))
    dead = chartkit.env(rendered.sidecar)["HUB_DEAD_HUB_AFTER"]
    assert dead == "3m"
    evaluation = 30
    assert stale + evaluation + seconds(alert["for"]) < seconds(dead), (stale, alert["for"], dead)


def test_switch_held_alert_leaves_out_the_holds_that_are_no_fault(rendered):
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerSwitchHeld"]
    filter_on(promql_parser.parse(alert["expr"]), "==", "kubeslice_worker_hub_switch_held", 1)
    ((metric, matchers),) = selectors(alert["expr"])
    op, value = matchers["why"]
    # older_than_basis is the steady state after a failover while the old hub keeps its
    # stale claim; split_brain is HubFollowerSplitBrain's.
    assert op == "Re" and set(value.split("|")) == ALERTED_WHYS == HELD_WHYS - {"older_than_basis", "split_brain"}
    annotations = alert["annotations"]
    assert "{{ $labels.why }}" in annotations["summary"]
    for text in ("why: {{ $labels.why }}", "/status .held", "HubSwitchHeld", " for 2m,"):
        assert text in annotations["description"], text
    assert annotations["runbook_url"].endswith("#hubfollowerswitchheld")


def test_split_brain_alert_names_the_window_the_pin_and_the_event(rendered):
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerSplitBrain"]
    filter_on(promql_parser.parse(alert["expr"]), "==", "kubeslice_worker_hub_split_brain", 1)
    description = alert["annotations"]["description"]
    for text in ("same epoch", "splitBrainWindow (5m)", "hub-follower.kubeslice.io/pin", "until the controllers agree", "HubSplitBrain"):
        assert text in description, text
    assert alert["annotations"]["runbook_url"].endswith("#hubfollowersplitbrain")


def test_new_alerts_follow_their_for_and_the_sidecar_settings(chart):
    r = chartkit.render(chart, chartkit.hf(
        deadHubAfter="10m", splitBrainWindow="15m",
        metrics={"prometheusRule": {"enabled": True, "for": {"activeHubUnreachable": "3m", "activeHubNotClaiming": "2m",
                                                             "basisUnconfirmed": "6m", "noClaimSeen": "4m", "switchHeld": "10m", "splitBrain": "5m"}}},
    ))
    _, alerts = rules(r)
    assert alerts["HubFollowerActiveHubUnreachable"]["for"] == "3m"
    assert "held for 3m." in alerts["HubFollowerActiveHubUnreachable"]["annotations"]["description"]
    assert "deadHubAfter (10m)" in alerts["HubFollowerActiveHubUnreachable"]["annotations"]["description"]
    assert alerts["HubFollowerActiveHubNotClaiming"]["for"] == "2m"
    assert "held for 2m," in alerts["HubFollowerActiveHubNotClaiming"]["annotations"]["description"]
    assert "deadHubAfter (10m)" in alerts["HubFollowerActiveHubNotClaiming"]["annotations"]["description"]
    assert alerts["HubFollowerBasisUnconfirmed"]["for"] == "6m"
    assert "deadHubAfter (10m), for 6m." in alerts["HubFollowerBasisUnconfirmed"]["annotations"]["description"]
    assert "> 600\n" in alerts["HubFollowerBasisUnconfirmed"]["expr"]
    assert alerts["HubFollowerNoClaimSeen"]["for"] == "4m"
    assert "held for 4m." in alerts["HubFollowerNoClaimSeen"]["annotations"]["description"]
    assert alerts["HubFollowerSwitchHeld"]["for"] == "10m"
    assert " for 10m," in alerts["HubFollowerSwitchHeld"]["annotations"]["description"]
    assert alerts["HubFollowerSplitBrain"]["for"] == "5m"
    assert "splitBrainWindow (15m)" in alerts["HubFollowerSplitBrain"]["annotations"]["description"]
    assert alerts["HubFollowerSecondaryHubUnreachable"]["for"] == "10m"


@pytest.mark.parametrize("key", ["activeHubUnreachable", "activeHubNotClaiming", "basisUnconfirmed", "noClaimSeen", "switchHeld", "splitBrain"])
@pytest.mark.parametrize("bad", ["5", "five minutes", "-5m", "500ms"])
def test_new_for_values_must_be_durations(chart, key, bad):
    with pytest.raises(Exception, match=key):
        chartkit.render(chart, chartkit.hf(metrics={"prometheusRule": {"enabled": True, "for": {key: bad}}}))


def test_split_brain_alert_without_overrides_does_not_advise_a_pin(chart):
    # Without the overrides volume the sidecar reads no pin: the advice is the controllers'.
    off = chartkit.render(chart, chartkit.hf(metrics={"prometheusRule": {"enabled": True}}, overrides={"enabled": False}))
    _, alerts = rules(off)
    description = alerts["HubFollowerSplitBrain"]["annotations"]["description"]
    assert "hub-follower.kubeslice.io/pin" not in description
    assert "leader election" in description and "overrides.enabled" in description and "HubSplitBrain" in description


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


def test_unreachable_alert_covers_every_hub_the_worker_is_not_on_and_not_a_drained_one(rendered):
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerSecondaryHubUnreachable"]
    tree = promql_parser.parse(alert["expr"])
    # ((errors > 0 unless recent success) unless (active == 1)) unless ignoring(kind)
    # (drain gauge > 0): the drain clause applies to the whole condition, matched on
    # every label but `kind`, which the probe series do not have.
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == "unless"
    assert str(tree.modifier.matching.type).endswith("Exclude") and list(tree.modifier.matching.labels) == ["kind"]
    drain = tree.rhs.expr if isinstance(tree.rhs, promql_parser.ParenExpr) else tree.rhs
    assert isinstance(drain, promql_parser.BinaryExpr) and str(drain.op) == ">"
    # A filter, not `> bool`, which would keep the 0s and suppress every hub.
    assert drain.modifier is None or not drain.modifier.return_bool
    assert isinstance(drain.lhs, promql_parser.VectorSelector)
    assert drain.lhs.name == "kubeslice_worker_hub_override_until_timestamp_seconds"
    assert isinstance(drain.rhs, promql_parser.NumberLiteral) and drain.rhs.val == 0
    # The hub the worker is on is left out: `unless (active == 1)`, matched on every
    # label (`hub` and the target labels, which both sides have), so one worker being
    # on a hub does not silence another worker's alert for it.
    standby = tree.lhs
    assert isinstance(standby, promql_parser.BinaryExpr) and str(standby.op) == "unless"
    matching = standby.modifier.matching if standby.modifier else None
    assert matching is None or (str(matching.type).endswith("Exclude") and not list(matching.labels))
    active = standby.rhs.expr if isinstance(standby.rhs, promql_parser.ParenExpr) else standby.rhs
    assert isinstance(active, promql_parser.BinaryExpr) and str(active.op) == "=="
    assert active.modifier is None or not active.modifier.return_bool
    assert isinstance(active.lhs, promql_parser.VectorSelector) and active.lhs.name == "kubeslice_worker_hub_active"
    assert isinstance(active.rhs, promql_parser.NumberLiteral) and active.rhs.val == 1
    probes = standby.lhs
    assert isinstance(probes, promql_parser.BinaryExpr) and str(probes.op) == "unless"
    assert [n.name for n in nodes(probes, promql_parser.VectorSelector)] == [
        "kubeslice_worker_hub_probe_errors_total",
        "kubeslice_worker_hub_last_probe_success_timestamp_seconds",
    ]
    assert "unless\n(kubeslice_worker_hub_active == 1)\nunless ignoring(kind)\n" in alert["expr"]
    assert 'unless ignoring(kind)\n(kubeslice_worker_hub_override_until_timestamp_seconds{kind="drain"} > 0)' in alert["expr"]
    # The alert names the hub it is about; Prometheus fills in the label.
    assert alert["annotations"]["summary"] == "hub-follower cannot probe the {{ $labels.hub }} hub."
    assert alert["annotations"]["description"].startswith("The {{ $labels.hub }} hub has failed every probe of {{ $labels.namespace }}/{{ $labels.pod }} for 10m.")


def test_unreachable_alert_is_the_same_with_overrides_off(chart):
    # With overrides off the drain gauge stays 0, so the clause never suppresses.
    asked = {"prometheusRule": {"enabled": True}}
    on = chartkit.rule_exprs(chartkit.render(chart, chartkit.hf(metrics=asked)))
    off = chartkit.rule_exprs(chartkit.render(chart, chartkit.hf(metrics=asked, overrides={"enabled": False})))
    assert on.pop("HubFollowerOverrideRefused")
    assert on == off


def test_refusal_alert_names_the_kind_and_where_to_read_the_reason(rendered):
    _, alerts = rules(rendered)
    alert = alerts["HubFollowerOverrideRefused"]
    tree = promql_parser.parse(alert["expr"])
    # A filter on the gauge itself: its `kind` and the target labels are the alert's.
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == "=="
    assert tree.modifier is None or not tree.modifier.return_bool
    assert isinstance(tree.lhs, promql_parser.VectorSelector) and tree.lhs.name == "kubeslice_worker_hub_override_refused"
    assert isinstance(tree.rhs, promql_parser.NumberLiteral) and tree.rhs.val == 1
    annotations = alert["annotations"]
    assert "{{ $labels.kind }}" in annotations["summary"]
    for text in ("hub-follower.kubeslice.io/{{ $labels.kind }}", "HubOverrideRefused", "/status .overrides.refused", " for 5m;"):
        assert text in annotations["description"], text
    assert annotations["runbook_url"].endswith("#hubfolloweroverriderefused")


def test_refusal_alert_follows_for_override_refused(chart):
    r = chartkit.render(chart, chartkit.hf(metrics={"prometheusRule": {"enabled": True, "for": {"overrideRefused": "20m"}}}))
    _, alerts = rules(r)
    assert alerts["HubFollowerOverrideRefused"]["for"] == "20m"
    assert " for 20m;" in alerts["HubFollowerOverrideRefused"]["annotations"]["description"]
    # The other durations keep their defaults.
    assert alerts["HubFollowerSecondaryHubUnreachable"]["for"] == "10m"


@pytest.mark.parametrize("bad", ["5", "five minutes", "-5m", ""])
def test_for_override_refused_must_be_a_duration(chart, bad):
    with pytest.raises(Exception, match="overrideRefused"):
        chartkit.render(chart, chartkit.hf(metrics={"prometheusRule": {"enabled": True, "for": {"overrideRefused": bad}}}))


def test_refusal_alert_only_with_the_overrides_volume(chart):
    # The sidecar reads no pin or drain without the volume (overrides.enabled false), so
    # the gauge stays 0: no alert. With listed hubs and no secondary, the volume and the
    # alert are there.
    asked = {"prometheusRule": {"enabled": True}}
    off = chartkit.render(chart, chartkit.hf(metrics=asked, overrides={"enabled": False}))
    assert "hub-follower-overrides" not in off.volumes
    _, alerts = rules(off)
    assert set(alerts) == ALERTS - {"HubFollowerOverrideRefused"}
    hubs_only = chartkit.render(chart, chartkit.hf(
        metrics=asked,
        secondary={"endpoint": "", "secretName": "", "tlsServerName": ""},
        hubs=[{"name": "hub-3", "endpoint": "https://hub-3.example.com:6443", "secretName": "kubeslice-hub-3-token"}],
    ))
    assert "hub-follower-overrides" in hubs_only.volumes
    _, alerts = rules(hubs_only)
    assert "HubFollowerOverrideRefused" in alerts


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
    active = alerts["HubFollowerActiveHubUnreachable"]
    assert "> 180\n" in active["expr"]
    assert "in the last 180s," in active["annotations"]["description"]


def anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading line."""
    return re.sub(r"[^a-z0-9 -]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")


def runbook_sections() -> dict[str, str]:
    """docs/runbooks.md's `## HubFollower…` sections, by alert name; each name once."""
    parts = re.split(r"^## (HubFollower\w+)\n", chartkit.RUNBOOKS.read_text(), flags=re.M)
    names = parts[1::2]
    assert len(names) == len(set(names)), f"a runbook section twice: {names}"
    return dict(zip(names, parts[2::2]))


# The guard's alert (charts/hub-follower-post-renderer/sidecar-guard.yaml), applied
# outside any release; its runbook is in docs/runbooks.md too.
GUARD = chartkit.REPO / "charts" / "hub-follower-post-renderer" / "sidecar-guard.yaml"


def guard_alert() -> dict:
    (alert,) = [r for g in yaml.safe_load(GUARD.read_text())["spec"]["groups"] for r in g["rules"]]
    return alert


def test_runbook_links_resolve_to_docs_sections(rendered):
    _, alerts = rules(rendered)
    headings = {anchor(line) for line in chartkit.RUNBOOKS.read_text().splitlines() if line.startswith("#")}
    default = yaml.safe_load((chartkit.LIBRARY / "values.yaml").read_text())["metrics"]["prometheusRule"]["runbookBaseURL"]
    assert default == "https://github.com/kubeslice/hub-follower/blob/main/docs/runbooks.md"
    for name, alert in [*alerts.items(), ("HubFollowerSidecarMissing", guard_alert())]:
        url = alert["annotations"]["runbook_url"]
        base, _, fragment = url.partition("#")
        assert base == default, url
        assert fragment == name.lower() and fragment in headings, (name, url)


def test_runbooks_md_has_one_section_per_alert_and_its_table_row(rendered):
    _, alerts = rules(rendered)
    alerts = {**alerts, "HubFollowerSidecarMissing": guard_alert()}
    sections = runbook_sections()
    assert set(sections) == set(alerts) == ALERTS | {"HubFollowerSidecarMissing"}
    text = chartkit.RUNBOOKS.read_text()
    for name, section in sections.items():
        alert = alerts[name]
        severity, duration = alert["labels"]["severity"], alert.get("for")
        # What it means, its expression, how to check, the fix.
        for part in (r"\*\*What it means\.\*\*", "```promql\n", r"\*\*Check", r"\*\*(Fix|Check and fix)\b"):
            assert re.search(part, section), (name, part)
        # The severity and `for` the rule has, in the section and in the table.
        said = re.search(r"^Severity `(\w+)`, (?:`for: (\w+)`|no `for`)", section, flags=re.M)
        assert said and said.groups() == (severity, duration), (name, said and said.groups())
        (row,) = [l for l in text.splitlines() if l.startswith(f"| [{name}](#{name.lower()}) |")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == severity and cells[2].split()[0] == (duration or "none"), row
        assert all(len(c.split()) <= 40 for c in cells), row


def test_runbooks_md_shows_each_rules_expression(rendered):
    # The expression of each section is the rule's, at the defaults (pollInterval 10s:
    # STALE 60, WINDOW 120; flappingWindow 1h, flappingSwitches 3).
    _, alerts = rules(rendered)
    alerts = {**alerts, "HubFollowerSidecarMissing": guard_alert()}
    defaults = {"FLAPPING_WINDOW": "1h", "FLAPPING_SWITCHES": "3", "WINDOWs": "120s", "STALE": "60"}
    for name, section in runbook_sections().items():
        shown = re.search(r"```promql\n(.*?)```", section, flags=re.S).group(1)
        for placeholder, value in defaults.items():
            shown = shown.replace(placeholder, value)
        assert shown.strip() == alerts[name]["expr"].strip(), name


def test_the_runbooks_are_in_one_place():
    # docs/runbooks.md is the one copy: helm.md and metrics.md hold no alert's section.
    for doc in ("helm.md", "metrics.md"):
        lines = (chartkit.REPO / "docs" / doc).read_text().splitlines()
        assert not [l for l in lines if l.startswith("#") and "HubFollower" in l], doc
