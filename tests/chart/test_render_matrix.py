"""The example chart rendered by real Helm at Kubernetes 1.35 in every restart mode, with
the native sidecar on and off and the exec wrapper on and off; each result is validated
against the Kubernetes schema and its pod structure is checked. restart-all with a
regular sidecar is the one combination the chart refuses, and that refusal is checked
instead."""

from __future__ import annotations

import itertools
import posixpath

import kubernetes_validate
import pytest

import chartkit
from chartkit import env, mounts

KUBE = f"{chartkit.CURRENT_K8S}.0"
ALL = list(itertools.product(chartkit.MODES, (True, False), (True, False)))
COMBOS = [c for c in ALL if chartkit.refusal(c[0], c[1], KUBE, c[2]) is None]
REFUSED = [c for c in ALL if c not in COMBOS]


def combo_id(c) -> str:
    m, n, w = c
    return f"{m}-{'native' if n else 'regular'}-{'wrapped' if w else 'bare'}"


IDS = [combo_id(c) for c in COMBOS]

PRIMARY_DIR = "/var/run/secrets/kubernetes.io/hub-serviceaccount"
SECONDARY_DIR = "/var/run/secrets/kubernetes.io/hub-secondary-serviceaccount"


@pytest.fixture(params=COMBOS, ids=IDS)
def combo(request, chart):
    mode, native, wrapper = request.param
    rendered = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper), kube_version=KUBE)
    return mode, native, wrapper, rendered


def test_the_matrix_leaves_out_only_restart_all_on_a_regular_sidecar_and_in_place_unwrapped():
    assert REFUSED == [
        ("restart-all", False, True),
        ("restart-all", False, False),
        ("in-place", True, False),
        ("in-place", False, False),
    ]


@pytest.mark.parametrize("mode,native,wrapper", REFUSED, ids=[combo_id(c) for c in REFUSED])
def test_refused_combinations_fail_naming_the_values(chart, mode, native, wrapper):
    message = chartkit.render_error(chart, chartkit.mode_values(mode, native, wrapper), kube_version=KUBE)
    assert chartkit.refusal(mode, native, KUBE, wrapper) in message, message


def test_every_manifest_is_valid_kubernetes(combo):
    *_, r = combo
    kinds = sorted(d["kind"] for d in r.docs)
    # The Role and RoleBinding for Events are on by default (events.rbac.create).
    assert kinds == ["Deployment", "Role", "RoleBinding"]
    for doc in r.docs:
        chartkit.validate_k8s(doc)


def test_regular_sidecar_also_fits_a_cluster_without_native_sidecars(chart):
    r = chartkit.render(chart, chartkit.mode_values("signal", native=False, wrapper=True))
    chartkit.validate_k8s(r.deployment, chartkit.PRE_SIDECAR_K8S)


def test_native_sidecar_needs_a_cluster_with_native_sidecars(chart):
    r = chartkit.render(chart, chartkit.mode_values("signal", native=True, wrapper=True))
    with pytest.raises(kubernetes_validate.ValidationError, match="restartPolicy"):
        chartkit.validate_k8s(r.deployment, chartkit.PRE_SIDECAR_K8S)


def test_sidecar_placement_and_probes(combo):
    mode, native, wrapper, r = combo
    sidecar = r.sidecar
    init_names = [c["name"] for c in r.init_containers]
    names = [c["name"] for c in r.containers]
    port = {p["name"]: p["containerPort"] for p in sidecar["ports"]}
    assert port == {"hub-follower": 8095}

    def probe(p):
        return (p["httpGet"]["path"], p["httpGet"]["port"])

    assert probe(sidecar["livenessProbe"]) == ("/healthz", "hub-follower")
    assert probe(sidecar["readinessProbe"]) == ("/readyz", "hub-follower")
    # The container restart rule is restart-all's, and only its.
    assert ("restartPolicyRules" in sidecar) is (mode == "restart-all")
    if native:
        assert "hub-follower" in init_names and "hub-follower" not in names
        assert sidecar["restartPolicy"] == "Always"
        assert probe(sidecar["startupProbe"]) == ("/readyz", "hub-follower")
        if wrapper:
            # The installer exits before the sidecar holds the worker back.
            assert init_names == ["hub-follower-install", "hub-follower"]
    else:
        assert names == ["manager", "hub-follower"]
        assert "restartPolicy" not in sidecar
        assert "startupProbe" not in sidecar
        assert init_names == (["hub-follower-install"] if wrapper else [])
    assert env(sidecar)["HUB_FOLLOWER_LISTEN"] == "0.0.0.0:8095"
    assert env(sidecar)["HUB_RESTART_MODE"] == mode


def test_every_mount_names_a_pod_volume(combo):
    *_, r = combo
    for c in r.init_containers + r.containers:
        for m in c.get("volumeMounts") or []:
            assert m["name"] in r.volumes, f"{c['name']} mounts unknown volume {m['name']}"


def test_handoff_and_credentials_are_shared_at_the_same_paths(combo):
    *_, r = combo
    sidecar, worker = r.sidecar, r.worker
    handoff_dir = env(sidecar)["HUB_HANDOFF_DIR"]
    assert env(worker)["HUB_HANDOFF_DIR"] == handoff_dir

    handoff = r.volumes[mounts(sidecar)[handoff_dir]["name"]]
    assert handoff["emptyDir"]["medium"] == "Memory"
    # The worker writes worker-ack.json into the handoff dir.
    assert mounts(worker)[handoff_dir]["name"] == handoff["name"]
    assert not mounts(worker)[handoff_dir].get("readOnly", False)

    # The handoff publishes credential paths: each must resolve in the worker too.
    for var in ("HUB_TOKEN_FILE", "HUB_CA_FILE", "HUB_SECONDARY_TOKEN_FILE", "HUB_SECONDARY_CA_FILE"):
        directory = posixpath.dirname(env(sidecar)[var])
        assert directory in mounts(sidecar), var
        assert directory in mounts(worker), var
        assert mounts(sidecar)[directory]["name"] == mounts(worker)[directory]["name"], var
        assert mounts(sidecar)[directory]["readOnly"] is True
        assert mounts(worker)[directory]["readOnly"] is True
    assert mounts(sidecar)[PRIMARY_DIR]["name"] == "hub-token"  # the worker's own volume

    secondary = r.volumes[mounts(worker)[SECONDARY_DIR]["name"]]["secret"]
    assert secondary["secretName"] == "kubeslice-hub-secondary-token"
    assert {i["key"] for i in secondary["items"]} == {"token", "ca.crt"}
    assert env(sidecar)["HUB_SECONDARY_HOST_ENDPOINT"] == "https://hub-2.example.com:6443"
    # primary.endpoint is a template pointing at the worker's own setting.
    assert env(sidecar)["HUB_HOST_ENDPOINT"] == env(worker)["HUB_HOST_ENDPOINT"]
    assert env(sidecar)["CLUSTER_NAME"] == env(worker)["CLUSTER_NAME"]
    assert env(sidecar)["HUB_PROJECT_NAMESPACE"] == env(worker)["HUB_PROJECT_NAMESPACE"]


def _assert_hardened(sc: dict, uid: int) -> None:
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == uid
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_security_contexts_hold(combo):
    mode, _, wrapper, r = combo
    worker_uid = r.worker["securityContext"]["runAsUser"]
    _assert_hardened(r.sidecar["securityContext"], worker_uid if mode == "signal" else 65532)
    if wrapper:
        _assert_hardened(r.installer["securityContext"], 65532)


def test_process_namespace_is_shared_only_in_signal_mode(combo):
    mode, _, _, r = combo
    assert r.pod.get("shareProcessNamespace", False) is (mode == "signal")
    sidecar_env = env(r.sidecar)
    assert ("HUB_WORKER_PROCESS" in sidecar_env) is (mode == "signal")
    if mode == "signal":
        assert sidecar_env["HUB_WORKER_PROCESS"] == "manager"


def test_worker_command_is_wrapped_exactly_when_exec_wrapper_is_on(combo):
    mode, _, wrapper, r = combo
    worker = r.worker
    assert worker["args"] == ["--leader-elect"]
    if not wrapper:
        assert worker["command"] == ["/manager"]
        assert r.installer is None
        assert all("emptyDir" not in v or v["emptyDir"].get("medium") == "Memory" for v in r.volumes.values())
        return
    binary = worker["command"][0]
    # In place, the wrapper stops the worker with the pod's grace (the example's is 10 s).
    in_place = ["--in-place", "--stop-grace", "10s"] if mode == "in-place" else []
    assert worker["command"][1:] == ["exec", "--wait", "120s", *in_place, "--", "/manager"]
    # The installer writes the binary into the volume the worker runs it from.
    installer = r.installer
    assert installer["args"] == ["install", binary]
    bin_dir = posixpath.dirname(binary)
    assert mounts(installer)[bin_dir]["name"] == mounts(worker)[bin_dir]["name"]
    assert mounts(worker)[bin_dir]["readOnly"] is True
    assert "emptyDir" in r.volumes[mounts(worker)[bin_dir]["name"]]


def test_worker_liveness_probe_follows_the_mode(combo):
    mode, _, _, r = combo
    probe = r.worker["livenessProbe"]
    if mode == "liveness":
        assert probe["httpGet"] == {"path": "/worker/livez", "port": 8095}
    else:
        assert probe == {"httpGet": {"path": "/healthz", "port": 8081}, "initialDelaySeconds": 15, "periodSeconds": 20}
    assert r.worker["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": 8081}


def test_scrape_annotations_point_at_the_sidecar(combo):
    *_, r = combo
    assert r.annotations["prometheus.io/scrape"] == "true"
    assert r.annotations["prometheus.io/port"] == str(r.sidecar["ports"][0]["containerPort"])
    assert r.annotations["prometheus.io/path"] == "/metrics"


def test_disabled_renders_the_plain_worker(chart):
    # Disabled needs no secondary hub: the schema asks for one only when enabled.
    r = chartkit.render(chart, chartkit.hf(enabled=False, secondary={"endpoint": "", "secretName": ""}))
    chartkit.validate_k8s(r.deployment)
    assert [c["name"] for c in r.containers] == ["manager"]
    assert r.init_containers == []
    assert list(r.volumes) == ["hub-token"]
    assert r.worker["command"] == ["/manager"]
    assert "HUB_HANDOFF_DIR" not in env(r.worker)
    assert "shareProcessNamespace" not in r.pod
    assert not any(k.startswith("prometheus.io/") for k in r.annotations)
    assert "hub-follower" not in r.notes


def test_notes_warn_when_nothing_holds_the_worker_back(chart):
    bare = chartkit.render(chart, chartkit.mode_values("signal", native=False, wrapper=False))
    assert "must itself wait" in bare.notes
    for native, wrapper in ((True, False), (False, True), (True, True)):
        r = chartkit.render(chart, chartkit.mode_values("signal", native, wrapper))
        assert "must itself wait" not in r.notes


def test_image_digest_pins_both_containers(chart):
    digest = "sha256:" + "ab" * 32
    r = chartkit.render(chart, chartkit.hf(image={"digest": digest, "tag": "0.2.0"}))
    expected = f"ghcr.io/kubeslice/hub-follower:0.2.0@{digest}"
    assert r.sidecar["image"] == expected
    assert r.installer["image"] == expected


def test_settings_reach_the_sidecar_env(chart):
    r = chartkit.render(
        chart,
        chartkit.hf(
            pollInterval="15s",
            probeTimeout="4s",
            confirmations=5,
            confirmInterval="2s",
            deadHubAfter="4m30s",
            splitBrainWindow="10m",
            defaultAfter="45s",
            watch={"timeout": "120s"},
            logFormat="text",
            logLevel="debug",
            port=9095,
            restart={"killAfter": "45s", "jitter": "1s", "cooldown": "2m", "verifyTimeout": "10m"},
            secondary={"tlsServerName": "hub-2.internal"},
            extraEnv=[{"name": "EXTRA", "value": "1"}],
        ),
    )
    e = env(r.sidecar)
    assert e["HUB_POLL_INTERVAL"] == "15s"
    assert e["HUB_PROBE_TIMEOUT"] == "4s"
    assert e["HUB_SWITCH_CONFIRMATIONS"] == "5"
    assert e["HUB_CONFIRM_INTERVAL"] == "2s"
    assert e["HUB_DEAD_HUB_AFTER"] == "4m30s"
    assert e["HUB_SPLIT_BRAIN_WINDOW"] == "10m"
    assert e["HUB_DEFAULT_AFTER"] == "45s"
    assert e["HUB_WATCH"] == "true"
    assert e["HUB_WATCH_TIMEOUT"] == "120s"
    assert e["HUB_FOLLOWER_LOG_FORMAT"] == "text"
    assert e["RUST_LOG"] == "debug"
    assert e["HUB_FOLLOWER_LISTEN"] == "0.0.0.0:9095"
    assert e["HUB_KILL_AFTER"] == "45s"
    assert e["HUB_RESTART_JITTER"] == "1s"
    assert e["HUB_RESTART_COOLDOWN"] == "2m"
    assert e["HUB_RESTART_VERIFY_TIMEOUT"] == "10m"
    assert e["HUB_SECONDARY_TLS_SERVER_NAME"] == "hub-2.internal"
    assert e["HUB_RESTART_SIGNAL"] == "SIGTERM"
    assert e["EXTRA"] == "1"
    assert r.annotations["prometheus.io/port"] == "9095"
    chartkit.validate_k8s(r.deployment)


def test_endpoint_and_namespace_can_come_from_the_hub_secret(chart):
    # The kubeslice-worker chart keeps both in its `kubeslice-hub` Secret.
    endpoint_ref = {"secretKeyRef": {"name": "kubeslice-hub", "key": "endpoint"}}
    namespace_ref = {"secretKeyRef": {"name": "kubeslice-hub", "key": "namespace"}}
    r = chartkit.render(
        chart,
        chartkit.hf(primary={"endpoint": "", "endpointFrom": endpoint_ref}, projectNamespaceFrom=namespace_ref),
    )
    chartkit.validate_k8s(r.deployment)
    by_name = {e["name"]: e for e in r.sidecar["env"]}
    assert by_name["HUB_HOST_ENDPOINT"] == {"name": "HUB_HOST_ENDPOINT", "valueFrom": endpoint_ref}
    assert by_name["HUB_PROJECT_NAMESPACE"] == {"name": "HUB_PROJECT_NAMESPACE", "valueFrom": namespace_ref}


def test_restart_signal_is_passed_in_signal_mode_only(chart):
    r = chartkit.render(chart, chartkit.hf(restart={"mode": "signal", "signal": "SIGINT"}))
    assert env(r.sidecar)["HUB_RESTART_SIGNAL"] == "SIGINT"
    r = chartkit.render(chart, chartkit.hf(restart={"mode": "liveness", "signal": "SIGINT"}))
    assert "HUB_RESTART_SIGNAL" not in env(r.sidecar)


def test_new_settings_default_to_the_binary_defaults(chart):
    e = env(chartkit.render(chart).sidecar)
    assert (e["HUB_CONFIRM_INTERVAL"], e["HUB_WATCH"], e["HUB_WATCH_TIMEOUT"]) == ("1s", "true", "120s")
    assert e["HUB_WATCHED_POLL_INTERVAL"] == "2m"
    assert (e["HUB_DEAD_HUB_AFTER"], e["HUB_SPLIT_BRAIN_WINDOW"], e["HUB_DEFAULT_AFTER"]) == ("3m", "5m", "30s")
    assert e["RUST_LOG"] == "info"


def test_watch_can_be_turned_off_with_the_exact_string_the_binary_reads(chart):
    # The binary reads HUB_WATCH as exactly `true` or `false`: not True, 0 or no.
    e = env(chartkit.render(chart, chartkit.hf(watch={"enabled": False})).sidecar)
    assert e["HUB_WATCH"] == "false"
    assert e["HUB_WATCH_TIMEOUT"] == "120s"


def test_the_watched_poll_interval_reaches_the_binary(chart):
    e = env(chartkit.render(chart, chartkit.hf(pollInterval="30s", watch={"watchedPollInterval": "30s"})).sidecar)
    assert e["HUB_WATCHED_POLL_INTERVAL"] == "30s"


@pytest.mark.parametrize("level", ["error", "warn", "info", "debug", "trace"])
def test_every_bare_log_level_reaches_rust_log(chart, level):
    assert env(chartkit.render(chart, chartkit.hf(logLevel=level)).sidecar)["RUST_LOG"] == level


SINGLE_HUB = {"endpoint": "", "secretName": "", "tlsServerName": ""}


SINGLE_HUB_COMBOS = [c for c in COMBOS if c[1:] in ((True, True), (False, False))]


@pytest.mark.parametrize("mode,native,wrapper", SINGLE_HUB_COMBOS, ids=[combo_id(c) for c in SINGLE_HUB_COMBOS])
def test_single_hub_mode_has_no_secondary_anywhere(chart, mode, native, wrapper):
    r = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper, secondary=SINGLE_HUB), kube_version=KUBE)
    chartkit.validate_k8s(r.deployment)
    sidecar_env = env(r.sidecar)
    # No HUB_SECONDARY_HOST_ENDPOINT at all is what puts the binary in single-hub mode.
    assert not [k for k in sidecar_env if k.startswith("HUB_SECONDARY_")]
    assert "hub-follower-secondary-hub" not in r.volumes
    for c in r.init_containers + r.containers:
        assert SECONDARY_DIR not in mounts(c), c["name"]
        for m in c.get("volumeMounts") or []:
            assert m["name"] in r.volumes, f"{c['name']} mounts unknown volume {m['name']}"
    # Everything else is still wired.
    assert sidecar_env["HUB_HOST_ENDPOINT"] == env(r.worker)["HUB_HOST_ENDPOINT"]
    assert mounts(r.sidecar)[PRIMARY_DIR]["name"] == "hub-token"
    assert "Single-hub mode" in r.notes


def test_notes_name_the_rbac_the_watch_needs(chart):
    on = chartkit.render(chart).notes
    assert "get, list and watch on" in on and "clusters.controller.kubeslice.io/<the worker's CLUSTER_NAME>" in on
    named = chartkit.render(chart, chartkit.hf(clusterName="worker-1")).notes
    assert "clusters.controller.kubeslice.io/worker-1" in named
    off = chartkit.render(chart, chartkit.hf(watch={"enabled": False})).notes
    assert "get, list and watch" not in off and "needs get on" in off
    assert "Single-hub mode" not in on
