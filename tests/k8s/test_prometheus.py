"""A real Prometheus scrapes the real binary through a failover between two real hubs.

Prometheus (Debian's package) scrapes hub-follower every second and evaluates the chart's
PrometheusRule, rendered by real Helm with short `for:` durations. The run shows:

- the Standby (secondary) hub frozen: HubFollowerSecondaryHubUnreachable goes pending,
  fires once its `for:` has passed, and resolves when the hub thaws;
- a promotion: the switch counter increments, the active gauge flips, the probe latency
  histogram has samples;
- every dashboard panel's query, and every template variable's, returns data.

What the queries returned goes to target/k8s/prometheus-failover.md, from which
docs/metrics.md quotes one run.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
import urllib.parse
from datetime import datetime
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from follower import Follower
from kube import REPO, Proc, free_port, wait_for

sys.path.insert(0, str(REPO / "tests" / "chart"))
import chartkit  # noqa: E402

A_ID, B_ID = "ctrl-a", "ctrl-b"
LONG_AGO = "2026-01-01T00:00:00Z"
QUICK = {"HUB_POLL_INTERVAL": "2s", "HUB_PROBE_TIMEOUT": "1s", "HUB_CONFIRM_INTERVAL": "500ms"}
UNREACHABLE_FOR = 15  # seconds: the `for:` of HubFollowerSecondaryHubUnreachable here
TARGET_LABELS = {"namespace": "kubeslice-system", "pod": "worker-0", "cluster": "worker-1"}
RESULTS = REPO / "target" / "k8s" / "prometheus-failover.md"


class Prometheus:
    def __init__(self, root: Path, follower_port: int, rules: dict[str, Any]):
        root.mkdir(parents=True, exist_ok=True)
        (root / "rules.yml").write_text(yaml.safe_dump(rules))
        (root / "prometheus.yml").write_text(yaml.safe_dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": ["rules.yml"],
            "scrape_configs": [{"job_name": "hub-follower", "static_configs": [
                {"targets": [f"127.0.0.1:{follower_port}"], "labels": TARGET_LABELS}]}],
        }))
        self.port = free_port()
        self.proc = Proc("prometheus", [
            shutil.which("prometheus") or "prometheus", f"--config.file={root / 'prometheus.yml'}",
            f"--storage.tsdb.path={root / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
        ], root / "prometheus.log")

    def start(self) -> "Prometheus":
        self.proc.start()
        wait_for("Prometheus ready", lambda: self._get("/-/ready", raw=True), 30, every=0.2)
        return self

    def stop(self) -> None:
        self.proc.stop()

    def _get(self, path: str, raw: bool = False, **params: str) -> Any:
        url = f"http://127.0.0.1:{self.port}{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except OSError:
            return None
        if raw:
            return body
        data = json.loads(body)
        assert data["status"] == "success", data
        return data["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self._get("/api/v1/query", query=expr)["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def query_range(self, expr: str, start: float, end: float, step: str = "2s") -> list[dict[str, Any]]:
        return self._get("/api/v1/query_range", query=expr, start=str(start), end=str(end), step=step)["result"]

    def alert(self, name: str) -> dict[str, Any] | None:
        """The alert as Prometheus lists it (state pending or firing, activeAt, labels,
        annotations), or None while it is inactive."""
        for a in self._get("/api/v1/alerts")["alerts"]:
            if a["labels"].get("alertname") == name:
                return a
        return None

    def state(self, name: str) -> str | None:
        a = self.alert(name)
        return a["state"] if a else None


@pytest.fixture
def monitored(tmp_path, hubs):
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (Debian: apt-get install prometheus)")
    a, b = hubs
    for hub in hubs:
        hub.claim(a.cp.endpoint, A_ID, LONG_AGO)
    import helm_python as helm

    with helm.Chart.load(chartkit.prepare_charts(tmp_path / "charts")) as chart:
        rule = {"enabled": True, "for": {"secondaryHubUnreachable": f"{UNREACHABLE_FOR}s", "noUsableHub": "5m", "watchDown": "15m"}}
        rendered = chartkit.render(chart, chartkit.hf(pollInterval="2s", probeTimeout="1s", confirmInterval="500ms", metrics={"prometheusRule": rule}))
    (doc,) = rendered.kind("PrometheusRule")
    f = Follower(tmp_path / "f", a, b, a.token(), b.token(), QUICK).start()
    prom = Prometheus(tmp_path / "prometheus", f.port, {"groups": doc["spec"]["groups"]})
    try:
        prom.start()
        yield f, prom
    finally:
        prom.stop()
        f.stop()


def dashboard_queries() -> list[tuple[str, str]]:
    d = json.loads(chartkit.DASHBOARD.read_text())
    return [(p["title"], t["expr"]) for p in d["panels"] for t in p.get("targets", [])]


def grafana(expr: str) -> str:
    """The query as Grafana sends it with every variable at All and a 1 s scrape interval."""
    return expr.replace("$pod", ".*").replace("$cluster", ".*").replace("$__rate_interval", "15s")


def test_a_failover_seen_by_a_real_prometheus(hubs, monitored):
    a, b = hubs
    f, prom = monitored
    report = ["# One failover as a real Prometheus saw it", ""]
    started = time.time()
    wait_for("the first scrape with A active", lambda: prom.value('kubeslice_worker_hub_active{hub="primary"}') == 1, 30)

    # The Standby frozen: pending, then firing after its `for:`, then resolved on thaw.
    b.cp.apiserver.freeze()
    try:
        name = "HubFollowerSecondaryHubUnreachable"
        frozen = time.time()
        pending = wait_for("the alert pending", lambda: prom.alert(name), 120, every=0.5)
        # Kept while it fires: it resolves soon after the thaw, and then is no longer listed.
        alert = wait_for("the alert firing", lambda: (a := prom.alert(name)) and a["state"] == "firing" and a, 60, every=0.5)
        firing = time.time()
    finally:
        b.cp.apiserver.thaw()
    # Prometheus' own account: active (pending) since activeAt, firing only after `for:`.
    active_at = datetime.fromisoformat(alert["activeAt"].replace("Z", "+00:00")).timestamp()
    assert alert["activeAt"] == pending["activeAt"], (pending, alert)
    assert firing - active_at >= UNREACHABLE_FOR, (alert, firing)
    assert alert["labels"]["severity"] == "warning" and alert["labels"]["hub"] == "secondary", alert
    assert alert["annotations"]["runbook_url"].endswith("#hubfollowersecondaryhubunreachable"), alert
    wait_for("the alert resolved", lambda: prom.state(name) is None, 60, every=0.5)
    resolved = time.time()
    b.cp.wait_ready()
    report += [f"- secondary frozen; alert pending (activeAt) {active_at - frozen:.0f} s after the freeze (the rule's"
               f" staleness bound, 60 s), seen firing {firing - active_at:.0f} s after activeAt (`for: {UNREACHABLE_FOR}s`),"
               f" resolved {resolved - firing:.0f} s after the thaw began", ""]

    # The promotion.
    switches_before = prom.value("kubeslice_worker_hub_switches_total")
    assert switches_before == 0
    b.claim(b.cp.endpoint, B_ID)
    wait_for("the switch published", lambda: f.published("secondary", "switch"), 30)
    wait_for("the switch scraped", lambda: prom.value("kubeslice_worker_hub_switches_total") == 1, 30)
    wait_for("the active gauge flipped", lambda: prom.value('kubeslice_worker_hub_active{hub="secondary"}') == 1
             and prom.value('kubeslice_worker_hub_active{hub="primary"}') == 0, 30)
    # Restart mode none: the restart is observed after the jitter (up to 5 s).
    wait_for("the observed restart scraped", lambda: prom.value('kubeslice_worker_hub_worker_restarts_total{outcome="observed"}') == 1, 30)
    time.sleep(3)  # a few more scrapes, so that rates over the restart have points after it
    end = time.time()
    assert prom.value("sum(kubeslice_worker_hub_probe_duration_seconds_count)") > 0

    shown = [
        ("the switch counter", "kubeslice_worker_hub_switches_total"),
        ("the active gauge", "kubeslice_worker_hub_active"),
        ("probes timed, per hub", "sum by (hub) (kubeslice_worker_hub_probe_duration_seconds_count)"),
        ("probe errors of the frozen hub", 'sum by (reason) (kubeslice_worker_hub_probe_errors_total{hub="secondary"}) > 0'),
    ]
    report += ["| query | result |", "| --- | --- |"]
    for _, expr in shown:
        rows = "; ".join(f"{fmt(r['metric'])} {r['value'][1]}" for r in prom.query(expr))
        report.append(f"| `{expr}` | {rows} |")
    report.append("")

    # Every panel shows data over the run; every variable has values.
    report += ["| panel | query | series | non-NaN points |", "| --- | --- | --- | --- |"]
    empty = []
    for title, expr in dashboard_queries():
        result = prom.query_range(grafana(expr), started, end)
        points = sum(1 for s in result for _, v in s["values"] if v.lower() != "nan")
        report.append(f"| {title} | `{expr[:60]}…` | {len(result)} | {points} |")
        if points == 0:
            empty.append((title, expr))
    assert not empty, f"panels without data: {empty}"
    # The template variables' queries, as Grafana runs label_values() (the pod variable's
    # with the cluster variable at All).
    variables = {v["name"]: v["query"]["query"] for v in json.loads(chartkit.DASHBOARD.read_text())["templating"]["list"] if v["type"] == "query"}
    for label, query in variables.items():
        selector = re.fullmatch(rf"label_values\((.+), {label}\)", query).group(1)
        values = prom._get(f"/api/v1/label/{label}/values", **{"match[]": grafana(selector)})
        assert values == [TARGET_LABELS[label]], (label, query, values)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(report) + "\n")
    print("\n".join(report))


def fmt(metric: dict[str, str]) -> str:
    keep = {k: v for k, v in metric.items() if k in ("__name__", "hub", "reason")}
    name = keep.pop("__name__", "")
    return name + ("{" + ",".join(f'{k}="{v}"' for k, v in sorted(keep.items())) + "}" if keep else "")


def test_the_rule_the_run_used_is_the_chart_s_with_only_for_changed(tmp_path):
    # The Prometheus run above evaluates the chart's rule with a short `for:`; everything
    # else (expressions, labels, annotations) is the default rendering.
    import helm_python as helm

    with helm.Chart.load(chartkit.prepare_charts(tmp_path / "charts")) as chart:
        default = chartkit.render(chart, chartkit.hf(pollInterval="2s", probeTimeout="1s", confirmInterval="500ms", metrics={"prometheusRule": {"enabled": True}})).kind("PrometheusRule")[0]
        short = chartkit.render(chart, chartkit.hf(pollInterval="2s", probeTimeout="1s", confirmInterval="500ms", metrics={"prometheusRule": {"enabled": True, "for": {
            "secondaryHubUnreachable": f"{UNREACHABLE_FOR}s", "noUsableHub": "5m", "watchDown": "15m"}}})).kind("PrometheusRule")[0]
    strip = lambda doc: [{k: v for k, v in r.items() if k != "for" and k != "annotations"} for g in doc["spec"]["groups"] for r in g["rules"]]  # noqa: E731
    assert strip(default) == strip(short)
    assert re.search(r"for 15s\.", json.dumps(short))
