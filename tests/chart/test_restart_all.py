"""restart.mode: restart-all (KEP-5532, RestartAllContainers): after a confirmed switch the
sidecar exits with restart.exitCode, and a container restart rule on the native sidecar
has the kubelet restart every container of the pod in place.

The chart's part is small: the rule on the sidecar, HUB_RESTART_MODE and
HUB_RESTART_EXIT_CODE in its env, and nothing else on the worker (no shared process
namespace, no UID, no liveness probe of the sidecar's). It refuses the mode below
Kubernetes 1.35 and on a regular sidecar container, where the rule cannot be.

kubernetes-validate's 1.35 schema knows `restartPolicyRules` on a container, but
leaves `action` a free string (so does 1.34's, where the field first appeared for
the `Restart` action), and it cannot know that the API server allows the rule on a
sidecar only with the feature gate. So the rule is validated there and its exact
shape is asserted here too.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

import chartkit
from chartkit import env, hf

KUBE = f"{chartkit.RESTART_ALL_K8S}.0"
RULE = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]


def restart_all(**values):
    return hf(**chartkit.deep_merge({"restart": {"mode": "restart-all"}}, values))


def test_sidecar_carries_the_restart_all_rule_with_the_default_exit_code(chart):
    r = chartkit.render(chart, restart_all(), kube_version=KUBE)
    sidecar = r.sidecar
    assert [c["name"] for c in r.init_containers] == ["hub-follower-install", "hub-follower"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["restartPolicyRules"] == RULE
    for doc in r.docs:
        chartkit.validate_k8s(doc, chartkit.RESTART_ALL_K8S)


def test_the_rule_and_the_env_carry_the_configured_exit_code(chart):
    r = chartkit.render(chart, restart_all(restart={"exitCode": 77}), kube_version=KUBE)
    assert r.sidecar["restartPolicyRules"][0]["exitCodes"] == {"operator": "In", "values": [77]}
    e = env(r.sidecar)
    # Env values are strings; the binary reads the code from this one.
    assert (e["HUB_RESTART_MODE"], e["HUB_RESTART_EXIT_CODE"]) == ("restart-all", "77")


def test_only_restart_all_passes_the_exit_code(chart):
    for mode in ("signal", "liveness", "none"):
        r = chartkit.render(chart, hf(restart={"mode": mode, "exitCode": 77}), kube_version=KUBE)
        assert "HUB_RESTART_EXIT_CODE" not in env(r.sidecar), mode
        assert "restartPolicyRules" not in r.sidecar, mode


def test_the_sidecar_gets_none_of_the_other_modes_settings(chart):
    e = env(chartkit.render(chart, restart_all(), kube_version=KUBE).sidecar)
    for name in ("HUB_WORKER_PROCESS", "HUB_RESTART_SIGNAL", "HUB_KILL_AFTER", "HUB_WORKER_PROBE",
                 "HUB_WORKER_PROBE_TIMEOUT", "HUB_WORKER_PROBE_GRACE"):
        assert name not in e, name
    # Read in every mode: they bound and pace verification.
    for name in ("HUB_LIVENESS_FAIL_FOR", "HUB_RESTART_VERIFY_TIMEOUT", "HUB_RESTART_JITTER", "HUB_RESTART_COOLDOWN"):
        assert name in e, name


@pytest.mark.parametrize("wrapper", [True, False])
def test_the_pod_is_the_one_of_none_mode_but_for_the_rule_and_the_env(chart, wrapper):
    # No shared PID namespace, no UID coupling, no liveness coupling: the worker, the
    # installer and the pod are exactly as in `none` mode.
    got = chartkit.render(chart, restart_all(execWrapper=wrapper), kube_version=KUBE).pod
    none = chartkit.render(chart, hf(restart={"mode": "none"}, execWrapper=wrapper), kube_version=KUBE).pod
    got = copy.deepcopy(got)
    (sidecar,) = [c for c in got["initContainers"] if c["name"] == "hub-follower"]
    assert sidecar.pop("restartPolicyRules") == RULE
    sidecar["env"] = [e for e in sidecar["env"] if e["name"] != "HUB_RESTART_EXIT_CODE"]
    for e in sidecar["env"]:
        if e["name"] == "HUB_RESTART_MODE":
            e["value"] = "none"
    assert got == none


def test_the_worker_keeps_its_uid_probe_and_process_namespace(worker_chart, plain_worker_chart):
    # The kubeslice-worker fixture's manager sets no runAsUser: signal mode would set one.
    values = {"hubFollower": {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"},
                              "restart": {"mode": "restart-all", "workerUID": 1001}}}
    r = chartkit.render(worker_chart, values, kube_version=KUBE)
    plain = chartkit.render(plain_worker_chart, None, kube_version=KUBE)
    assert "shareProcessNamespace" not in r.pod
    assert r.worker["securityContext"] == plain.worker["securityContext"] == {"allowPrivilegeEscalation": False}
    assert r.worker["livenessProbe"] == plain.worker["livenessProbe"]
    assert "startupProbe" not in r.worker
    ctx = r.sidecar["securityContext"]
    assert (ctx["runAsUser"], ctx["runAsNonRoot"], ctx["capabilities"]) == (65532, True, {"drop": ["ALL"]})
    assert r.sidecar["restartPolicyRules"] == RULE


def test_the_sidecar_is_native_when_nativesidecar_is_unset(chart):
    values = restart_all()
    values["hubFollower"]["nativeSidecar"] = None
    r = chartkit.render(chart, values, kube_version=KUBE)
    assert "hub-follower" in [c["name"] for c in r.init_containers]
    assert r.sidecar["restartPolicyRules"] == RULE


@pytest.mark.parametrize("kube", ["1.34.3", "1.34.9-gke.100", "1.33.0", "1.29.0"])
def test_below_1_35_the_render_fails_naming_the_mode_and_the_feature_gate(chart, kube):
    message = chartkit.render_error(chart, restart_all(), kube_version=kube)
    assert (
        "hubFollower.restart.mode: restart-all needs Kubernetes 1.35 or later with the RestartAllContainersOnContainerExits "
        "feature gate (alpha in 1.35; it needs NodeDeclaredFeatures too) on kube-apiserver and kubelet, "
        f"and this render targets v{kube}; choose signal or liveness"
    ) in message, message


def test_a_1_35_prerelease_or_vendor_build_renders(chart):
    for kube in ("1.35.0-rc.0", "1.35.2-gke.1000", "1.36.0"):
        assert chartkit.render(chart, restart_all(), kube_version=kube).sidecar["restartPolicyRules"] == RULE


def test_below_1_29_the_restart_all_reason_comes_before_the_native_sidecar_one(chart):
    # nativeSidecar: true below 1.29 has its own refusal; restart-all's says what to change.
    message = chartkit.render_error(chart, restart_all(nativeSidecar=True), kube_version="1.27.0")
    assert chartkit.RESTART_ALL_BELOW_1_35 in message and "v1.27.0" in message, message


def test_a_regular_sidecar_is_refused_naming_both_values(chart):
    message = chartkit.render_error(chart, restart_all(nativeSidecar=False), kube_version=KUBE)
    assert (
        "hubFollower.nativeSidecar: false does not go with hubFollower.restart.mode: restart-all; its RestartAllContainers "
        "rule is allowed only on a native sidecar (an init container with restartPolicy: Always)"
    ) in message, message


def test_notes_say_it_relies_on_the_alpha_gate_and_what_happens_without_it(chart):
    notes = chartkit.render(chart, restart_all(restart={"exitCode": 77}), kube_version=KUBE).notes
    assert "restart mode restart-all, native sidecar (Kubernetes v1.35.0)" in notes
    text = " ".join(notes.split())
    assert "after a switch the sidecar exits 77 and the kubelet restarts every container of the pod in place" in text
    assert "alpha feature gate RestartAllContainersOnContainerExits (with NodeDeclaredFeatures)" in text
    assert "a kubelet without it treats the exit as an ordinary sidecar crash: only the sidecar restarts" in text
    assert "reports the worker `unverified` and does not exit again" in text
    for mode in ("signal", "liveness", "none"):
        assert "RestartAllContainers" not in chartkit.render(chart, hf(restart={"mode": mode}), kube_version=KUBE).notes


def test_notes_warn_that_without_the_wrapper_the_worker_restarts_on_the_old_hub(chart):
    bare = " ".join(chartkit.render(chart, restart_all(execWrapper=False), kube_version=KUBE).notes.split())
    assert "WARNING: execWrapper=false" in bare
    assert "In restart-all mode the kubelet restarts every container after a switch, the worker too, and it comes back on the old hub." in bare
    wrapped = chartkit.render(chart, restart_all(), kube_version=KUBE).notes
    assert "execWrapper=false" not in wrapped and "old hub" not in wrapped


def test_kubernetes_validate_checks_the_rules_shape_not_its_action(chart):
    # What the schema validation above proves, and what it does not.
    deployment = chartkit.render(chart, restart_all(), kube_version=KUBE).deployment
    chartkit.validate_k8s(deployment, chartkit.RESTART_ALL_K8S)
    # Before 1.34 a container has no restartPolicyRules at all: strict validation refuses it.
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicyRules"):
        chartkit.validate_k8s(deployment, "1.33")
    # A misshapen rule is refused ...
    broken = copy.deepcopy(deployment)
    (sidecar,) = [c for c in broken["spec"]["template"]["spec"]["initContainers"] if c["name"] == "hub-follower"]
    sidecar["restartPolicyRules"] = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": ["42"]}}]
    with pytest.raises(kubernetes_validate.ValidationError):
        chartkit.validate_k8s(broken, chartkit.RESTART_ALL_K8S)
    # ... but any action passes, so the exact rule is asserted in the tests above.
    sidecar["restartPolicyRules"] = [{"action": "RestartSomething", "exitCodes": {"operator": "In", "values": [42]}}]
    chartkit.validate_k8s(broken, chartkit.RESTART_ALL_K8S)
