"""The Grafana dashboard: a ConfigMap the Grafana sidecar finds, rendered through
hub-follower.inject in the example chart and the kubeslice-worker fixture; its JSON;
every query valid PromQL on known metrics, filtered by the template variables.

That the binary really exports the metrics named here is checked against its /metrics
in tests/image/test_image.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import helm_python as helm
import promql_parser
import pytest

import chartkit

SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}
PARENTS = {"example": {}, "fixture": {"enabled": True, "secondary": SECONDARY}}
NAME = f"{chartkit.RELEASE}-hub-follower-dashboard"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# What the panels show, one metric each (the probe latency from the histogram's buckets).
SHOWN = {
    "kubeslice_worker_hub_active",
    "kubeslice_worker_hub_switches_total",
    "kubeslice_worker_hub_switch_pending_confirmations",
    "kubeslice_worker_hub_probe_errors_total",
    "kubeslice_worker_hub_probe_duration_seconds_bucket",
    "kubeslice_worker_hub_worker_restarts_total",
    "kubeslice_worker_hub_watch_up",
    "kubeslice_worker_hub_events_failed_total",
}


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(chartkit.DASHBOARD.read_text())


@pytest.fixture
def charts(chart, worker_chart):
    return {"example": chart, "fixture": worker_chart}


def values(parent: str, **dashboard) -> dict:
    return {"hubFollower": dict(PARENTS[parent], **({"dashboard": dashboard} if dashboard else {}))}


def configmap(r: chartkit.Rendered) -> dict | None:
    found = [d for d in r.kind("ConfigMap") if d["metadata"]["name"] == NAME]
    assert len(found) <= 1
    return found[0] if found else None


# The chart's part.


@pytest.mark.parametrize("parent", PARENTS)
def test_no_dashboard_unless_asked(charts, parent):
    assert configmap(chartkit.render(charts[parent], values(parent))) is None
    assert configmap(chartkit.render(charts[parent], values(parent, enabled=False))) is None
    # Asked for, but hub-follower is off: nothing of hub-follower at all.
    off = chartkit.render_files(charts[parent], {"hubFollower": {"enabled": False, "dashboard": {"enabled": True}}})
    assert "hub-follower" not in "".join(t for n, t in off.items() if not n.endswith("NOTES.txt"))


@pytest.mark.parametrize("parent", PARENTS)
def test_dashboard_configmap_is_found_by_the_grafana_sidecar(charts, parent, dashboard):
    r = chartkit.render(charts[parent], values(parent, enabled=True, annotations={"grafana_folder": "KubeSlice"}))
    for doc in r.docs:
        chartkit.validate_k8s(doc)
    cm = configmap(r)
    assert cm is not None
    assert cm["metadata"]["namespace"] == chartkit.NAMESPACE
    # kube-prometheus-stack's Grafana sidecar: label grafana_dashboard, value "1".
    assert cm["metadata"]["labels"] == {
        "app.kubernetes.io/name": "hub-follower",
        "app.kubernetes.io/instance": chartkit.RELEASE,
        "app.kubernetes.io/managed-by": "Helm",
        "grafana_dashboard": "1",
    }
    assert cm["metadata"]["annotations"] == {"grafana_folder": "KubeSlice"}
    assert list(cm["data"]) == ["hub-follower.json"]
    # The file, as it is in the chart.
    assert json.loads(cm["data"]["hub-follower.json"]) == dashboard
    # The parent's own documents are all still there.
    if parent == "fixture":
        assert {d["metadata"]["name"] for d in r.kind("ConfigMap")} == {NAME, "kubeslice-worker-event-schema-conf"}


def test_label_namespace_and_annotations_follow_the_values(chart):
    r = chartkit.render(chart, chartkit.hf(dashboard={"enabled": True, "label": "example.com/dashboard", "labelValue": "hub-follower", "namespace": "monitoring"}))
    cm = configmap(r)
    chartkit.validate_k8s(cm)
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["example.com/dashboard"] == "hub-follower"
    assert "grafana_dashboard" not in cm["metadata"]["labels"]
    assert "annotations" not in cm["metadata"]


def test_a_label_of_the_charts_own_is_refused(chart):
    message = chartkit.render_error(chart, chartkit.hf(dashboard={"enabled": True, "label": "app.kubernetes.io/name"}))
    assert "hubFollower.dashboard.label" in message and "one of the labels the chart sets itself" in message


def test_a_missing_dashboard_file_fails_with_the_reason(tmp_path):
    # The library reads its file through the parent's .Subcharts.hubFollower.
    example = tmp_path / chartkit.EXAMPLE.name
    shutil.copytree(chartkit.LIBRARY, tmp_path / chartkit.LIBRARY.name, ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    (tmp_path / chartkit.LIBRARY.name / "files" / "dashboard.json").unlink()
    shutil.copytree(chartkit.EXAMPLE, example, ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    helm.dependency_update(example)
    with helm.Chart.load(example) as chart:
        message = chartkit.render_error(chart, chartkit.hf(dashboard={"enabled": True}))
        assert chartkit.render(chart).kind("Deployment")
    assert "hubFollower.dashboard.enabled" in message and "files/dashboard.json" in message


# The dashboard.


def test_dashboard_identity(dashboard):
    assert dashboard["uid"] == "hub-follower"
    assert dashboard["title"] == "hub-follower"
    # Grafana 10.0 writes schemaVersion 38.
    assert dashboard["schemaVersion"] >= 38
    # Provisioned dashboards carry no database id.
    assert dashboard["id"] is None


def test_template_variables(dashboard):
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "pod"]
    ds = variables["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")
    for name in ("cluster", "pod"):
        v = variables[name]
        assert v["type"] == "query" and v["datasource"] == DATASOURCE
        assert v["includeAll"] is True
        query = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        assert re.fullmatch(rf"label_values\(.+, {name}\)", query), query
        ((metric, matchers),) = chartkit.selectors(chartkit.dashboard_variable_selector(v))
        assert metric == "kubeslice_worker_hub_active"
        # A scrape without a `cluster` label gives series whose cluster is "": the All
        # value must match it, or every panel is empty.
        assert re.fullmatch(v["allValue"], "") is not None
        assert matchers.get("cluster", ("Re", "$cluster")) == ("Re", "$cluster")


def test_every_panel_queries_the_chosen_data_source(dashboard):
    panels = chartkit.dashboard_panels(dashboard)
    assert panels
    for panel in panels:
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]


def test_every_query_is_promql_on_known_metrics_filtered_by_pod_and_cluster(dashboard):
    targets = chartkit.dashboard_targets(dashboard)
    assert targets
    for panel, target in targets:
        expr = target["expr"]
        # Ranges follow the scrape interval.
        assert set(re.findall(r"\[([^\]]*)\]", expr)) <= {"$__rate_interval"}, (panel["title"], expr)
        promql = chartkit.grafana_promql(expr)
        assert "$__" not in promql
        used = chartkit.selectors(promql)
        assert used, panel["title"]
        for metric, matchers in used:
            assert metric in chartkit.METRICS, (panel["title"], metric)
            assert matchers.get("pod") == ("Re", "$pod"), (panel["title"], expr)
            assert matchers.get("cluster") == ("Re", "$cluster"), (panel["title"], expr)
    refs = [[t["refId"] for t in p["targets"]] for p in chartkit.dashboard_panels(dashboard)]
    assert all(len(r) == len(set(r)) for r in refs)


def test_the_panels_show_what_operators_look_at(dashboard):
    shown = set()
    for expr in chartkit.dashboard_exprs(dashboard):
        shown |= chartkit.metric_names(expr)
    assert shown == SHOWN


def aggregations(expr: str) -> list[tuple[str, list[str]]]:
    found = []

    def visit(node):
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            found.append((str(node.modifier.type).rpartition(".")[2], list(node.modifier.labels)))

    promql_parser.walk(promql_parser.parse(chartkit.grafana_promql(expr)), visit)
    return found


def test_breakdowns(dashboard):
    by_metric: dict[str, list[str]] = {}
    for _, target in chartkit.dashboard_targets(dashboard):
        for metric in chartkit.metric_names(chartkit.grafana_promql(target["expr"])):
            by_metric.setdefault(metric, []).append(target["expr"])
    (errors,) = by_metric["kubeslice_worker_hub_probe_errors_total"]
    assert aggregations(errors) == [("By", ["hub", "reason"])]
    (restarts,) = by_metric["kubeslice_worker_hub_worker_restarts_total"]
    assert aggregations(restarts) == [("By", ["mode", "outcome"])]
    for metric in ("kubeslice_worker_hub_active", "kubeslice_worker_hub_watch_up"):
        (expr,) = by_metric[metric]
        assert "hub" in aggregations(expr)[0][1], metric
    quantiles = []
    for expr in by_metric["kubeslice_worker_hub_probe_duration_seconds_bucket"]:
        tree = promql_parser.parse(chartkit.grafana_promql(expr))
        assert isinstance(tree, promql_parser.Call) and tree.func.name == "histogram_quantile"
        quantiles.append(tree.args[0].val)
        assert aggregations(expr) == [("By", ["hub", "le"])]
    assert sorted(quantiles) == [0.5, 0.99]


def test_promql_check_catches_a_broken_query():
    with pytest.raises(ValueError):
        chartkit.selectors(chartkit.grafana_promql('sum(rate(kubeslice_worker_hub_switches_total{pod=~"$pod"}[$__rate_interval])'))


def test_layout(dashboard):
    panels = chartkit.dashboard_panels(dashboard)
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine


@pytest.mark.parametrize("events", [True, False], ids=["events-on", "events-off"])
def test_both_parents_lint_clean_with_the_dashboard(example_dir, worker_chart_dir, events):
    for directory, parent in ((example_dir, "example"), (worker_chart_dir, "fixture")):
        v = values(parent, enabled=True, annotations={"grafana_folder": "KubeSlice"})
        v["hubFollower"]["events"] = {"enabled": events}
        report = helm.lint(directory, v, strict=True)
        assert report["total_charts_linted"] == 1
        # Severity: 1 info, 2 warning, 3 error.
        assert [m for m in report["messages"] if m["severity"] >= 2] + report["errors"] == [], (parent, report)


# Grafana's own schema for the dashboard, from the Go module pinned in tests/k8s/lint
# (github.com/grafana/grafana-foundation-sdk/go); see tests/k8s/lint/grafana-dashboard.
SCHEMA_CHECK = chartkit.REPO / "target" / "tools" / "grafana-dashboard"


@pytest.fixture(scope="module")
def schema_check():
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain to build tests/k8s/lint/grafana-dashboard")
    subprocess.run(["go", "build", "-o", str(SCHEMA_CHECK), "./grafana-dashboard"],
                   cwd=chartkit.REPO / "tests" / "k8s" / "lint", check=True, capture_output=True, timeout=600)
    return SCHEMA_CHECK


def check_schema(schema_check, path) -> subprocess.CompletedProcess:
    return subprocess.run([str(schema_check), str(path)], capture_output=True, text=True, timeout=60)


def test_the_dashboard_is_valid_for_grafanas_schema(schema_check, dashboard):
    r = check_schema(schema_check, chartkit.DASHBOARD)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"valid (schemaVersion {dashboard['schemaVersion']}, {len(dashboard['panels'])} panels" in r.stdout


@pytest.mark.parametrize(
    "break_it,problem",
    [
        (lambda d: d.update(shemaVersion=39), "unexpected field 'shemaVersion'"),
        (lambda d: d["panels"][0]["gridPos"].update(w=30), "gridPos.w: must be <= 24"),
        (lambda d: d["panels"][2]["fieldConfig"].update(defualts={}), "unexpected field 'defualts'"),
        (lambda d: d["panels"][0]["options"]["legend"].update(displayMode="nonsense"), "legend.displayMode: nonsense is not one of"),
        (lambda d: d["panels"][2]["targets"][0].update(exprr="up"), "unexpected field 'exprr'"),
        (lambda d: d["panels"][1].update(type="state-timelin"), 'unknown panel type "state-timelin"'),
        (lambda d: d["templating"]["list"][1].update(hide=7), "hide: 7 is not one of"),
        (lambda d: d["panels"][0]["options"]["legend"].pop("calcs"), "legend.calcs: required field is missing"),
    ],
    ids=["unknown-field", "grid-width", "field-config-typo", "legend-enum", "target-typo", "panel-type", "variable-hide", "required"],
)
def test_the_schema_check_catches_a_broken_dashboard(schema_check, dashboard, tmp_path, break_it, problem):
    broken = json.loads(json.dumps(dashboard))
    break_it(broken)
    path = tmp_path / "dashboard.json"
    path.write_text(json.dumps(broken))
    r = check_schema(schema_check, path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert problem in r.stdout, r.stdout
