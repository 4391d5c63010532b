"""restart.mode: in-place. The exec wrapper stays the worker container's first process and
restarts the worker as its child when the sidecar asks, so the chart's part is the
wrapper's flags: `--in-place`, and `--stop-grace` from the pod's
terminationGracePeriodSeconds (kubelet's own grace; 30 s when unset). No shared PID
namespace, no liveness coupling, the sidecar as "nonroot". Without the wrapper the mode
cannot work, and the chart refuses it.

The render matrices (test_render_matrix, test_kubeslice_worker, test_post_renderer) cover
in-place in all three integrations; this file holds what is particular to it.
"""

from __future__ import annotations

import pytest

import chartkit
from chartkit import env

KUBE = f"{chartkit.CURRENT_K8S}.0"
ON = {"hubFollower": {"enabled": True, "restart": {"mode": "in-place"},
                      "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}}}


def post_rendered_worker(post_renderer_chart, plain_worker_chart, grace_line: str | None) -> dict:
    """The worker container the post-renderer gives for the fixture's Deployment with its
    `terminationGracePeriodSeconds: 10` line replaced by `grace_line` (None: removed)."""
    files = chartkit.render_files(plain_worker_chart, ON, kube_version=KUBE)
    line = "terminationGracePeriodSeconds: 10"
    assert any(line in t for t in files.values()), "the fixture's grace line moved"
    files = {n: t.replace(line, grace_line or "") for n, t in files.items()}
    stream = chartkit.post_renderer_input(files)
    out = chartkit.Rendered(chartkit.render_files(post_renderer_chart, dict(ON, manifests=stream), kube_version=KUBE))
    return out.worker


@pytest.mark.parametrize("grace_line,flag", [
    ("terminationGracePeriodSeconds: 45", "45s"),
    (None, "30s"),
    # kubelet kills at once with 0; the wrapper's shortest grace is a second.
    ("terminationGracePeriodSeconds: 0", "1s"),
], ids=["45s", "unset", "zero"])
def test_the_stop_grace_is_the_pods(post_renderer_chart, plain_worker_chart, grace_line, flag):
    worker = post_rendered_worker(post_renderer_chart, plain_worker_chart, grace_line)
    command = worker["command"]
    assert command[command.index("--stop-grace") + 1] == flag, command
    assert command[command.index("--") - 3:command.index("--")] == ["--in-place", "--stop-grace", flag]


@pytest.mark.parametrize("native", [True, False])
def test_the_pod_shares_no_pid_namespace_and_the_worker_keeps_its_own_probe(chart, native):
    r = chartkit.render(chart, chartkit.mode_values("in-place", native, True), kube_version=KUBE)
    none = chartkit.render(chart, chartkit.mode_values("none", native, True), kube_version=KUBE)
    assert "shareProcessNamespace" not in r.pod
    assert r.worker["livenessProbe"] == none.worker["livenessProbe"]
    assert r.sidecar["securityContext"]["runAsUser"] == 65532
    e = env(r.sidecar)
    assert e["HUB_RESTART_MODE"] == "in-place"
    for name in ("HUB_WORKER_PROCESS", "HUB_RESTART_SIGNAL", "HUB_RESTART_EXIT_CODE"):
        assert name not in e, name
    assert "restartPolicyRules" not in r.sidecar
    assert "in-place" in r.notes and "restartCount" in r.notes


def test_in_place_without_the_wrapper_is_refused_in_every_integration(chart, worker_chart, post_renderer_chart, plain_worker_chart):
    bare = chartkit.mode_values("in-place", True, False)
    assert chartkit.IN_PLACE_BARE in chartkit.render_error(chart, bare, kube_version=KUBE)
    values = chartkit.deep_merge(ON, {"hubFollower": {"execWrapper": False}})
    assert chartkit.IN_PLACE_BARE in chartkit.render_error(worker_chart, values, kube_version=KUBE)
    stream = chartkit.post_renderer_input(chartkit.render_files(plain_worker_chart, values, kube_version=KUBE))
    message = chartkit.render_error(post_renderer_chart, dict(values, manifests=stream), kube_version=KUBE)
    assert chartkit.IN_PLACE_BARE in message, message
