"""hub-follower.inject on a chart shaped like kubeslice-worker (fixtures/kubeslice-worker).

The fixture gets hub-follower by the dependency, the wrap of its operator template and
`hubFollower: {enabled: true, secondary: {endpoint, secretName}}` alone. Every restart
mode, with and without the exec wrapper, with native, regular and unset nativeSidecar,
is rendered by real Helm at Kubernetes 1.33 and 1.27 and compared with the fixture's
own render (the same chart without hub-follower). restart-all, which needs 1.35 and a
native sidecar, is rendered at 1.35 with nativeSidecar true and unset; its refusals at
1.33, at 1.27 and with nativeSidecar false are checked on their own.
"""

from __future__ import annotations

import itertools
import posixpath

import helm_python as helm
import pytest
import yaml

import chartkit
from chartkit import mounts

SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}
MINIMAL = {"enabled": True, "secondary": SECONDARY}
PRIMARY_DIR = "/var/run/secrets/kubernetes.io/hub-serviceaccount"
COPIED = ("HUB_HOST_ENDPOINT", "HUB_PROJECT_NAMESPACE", "CLUSTER_NAME")

# nativeSidecar: None leaves it unset (follows the cluster's version).
K8S = {"1.33": (True, False, None), "1.27": (False, None), chartkit.RESTART_ALL_K8S: (True, None)}
ALL = [
    (kube, mode, native, wrapper)
    for kube, natives in K8S.items()
    for mode, native, wrapper in itertools.product(chartkit.MODES, natives, (True, False))
]
# restart-all at 1.35, every other mode at 1.33 and 1.27.
COMBOS = [c for c in ALL if (c[1] == "restart-all") == (c[0] == chartkit.RESTART_ALL_K8S) and chartkit.refusal(c[1], c[2], c[0], c[3]) is None]
# Every restart-all combination the chart refuses: all below 1.35, and a regular sidecar.
REFUSED = [c for c in ALL if c[1] == "restart-all" and chartkit.refusal(*c[1:3], c[0])] + [
    (chartkit.RESTART_ALL_K8S, "restart-all", False, wrapper) for wrapper in (True, False)
]


def combo_id(c) -> str:
    kube, mode, native, wrapper = c
    flavour = {True: "native", False: "regular", None: "unset"}[native]
    return f"k8s{kube}-{mode}-{flavour}-{'wrapped' if wrapper else 'bare'}"


def values(mode: str, native: bool | None, wrapper: bool, **extra) -> dict:
    hf = dict(MINIMAL, restart={"mode": mode}, execWrapper=wrapper, **extra)
    if native is not None:
        hf["nativeSidecar"] = native
    return {"hubFollower": hf}


_cache: dict = {}


def rendered(chart, key, vals, kube) -> chartkit.Rendered:
    if key not in _cache:
        _cache[key] = chartkit.render(chart, vals, kube_version=f"{kube}.0")
    return _cache[key]


@pytest.fixture(params=COMBOS, ids=[combo_id(c) for c in COMBOS])
def combo(request, worker_chart, plain_worker_chart):
    kube, mode, native, wrapper = request.param
    r = rendered(worker_chart, ("hf",) + request.param, values(mode, native, wrapper), kube)
    plain = rendered(plain_worker_chart, ("plain", kube), None, kube)
    return kube, mode, native, wrapper, r, plain


def test_restart_all_is_rendered_at_1_35_and_refused_elsewhere():
    rendered_restart_all = {(k, n) for k, m, n, _ in COMBOS if m == "restart-all"}
    assert rendered_restart_all == {("1.35", True), ("1.35", None)}
    assert {(k, n) for k, _, n, _ in REFUSED} == {("1.33", True), ("1.33", False), ("1.33", None), ("1.27", False), ("1.27", None), ("1.35", False)}


@pytest.mark.parametrize("c", REFUSED, ids=[combo_id(c) for c in REFUSED])
def test_restart_all_refusals_name_the_value(worker_chart, c):
    kube, mode, native, wrapper = c
    message = chartkit.render_error(worker_chart, values(mode, native, wrapper), kube_version=f"{kube}.0")
    assert chartkit.refusal(mode, native, kube) in message, message
    if kube != chartkit.RESTART_ALL_K8S:
        assert f"this render targets v{kube}.0; choose signal or liveness" in message, message


def by_name(items) -> dict:
    return {i["name"]: i for i in items or []}


def test_every_document_validates_at_that_kubernetes_version(combo):
    kube, *_, r, _ = combo
    # The parent's Deployment, ConfigMap and Secret, and the RBAC for Events (on by default).
    assert sorted(d["kind"] for d in r.docs) == ["ConfigMap", "Deployment", "Role", "RoleBinding", "Secret"]
    for doc in r.docs:
        chartkit.validate_k8s(doc, kube)


def test_the_yaml_has_no_duplicate_key(combo):
    *_, r, _ = combo
    # Rendered loads with StrictLoader already; load again explicitly, file by file.
    for name, text in r.files.items():
        if not name.endswith("NOTES.txt"):
            chartkit.load_all_strict(text)


def test_strict_loader_refuses_a_duplicate_key():
    with pytest.raises(yaml.constructor.ConstructorError, match="duplicate key 'prometheus.io/port'"):
        chartkit.load_all_strict('annotations:\n  prometheus.io/port: "8080"\n  prometheus.io/port: "8095"\n')


def test_sidecar_flavour_follows_the_cluster_version(combo):
    kube, mode, native, _, r, _ = combo
    expected = native if native is not None else chartkit.at_least(kube, "1.29")
    init_names = [c["name"] for c in r.init_containers]
    names = [c["name"] for c in r.containers]
    assert ("restartPolicyRules" in r.sidecar) is (mode == "restart-all")
    if expected:
        assert "hub-follower" in init_names and r.sidecar["restartPolicy"] == "Always"
        assert names == ["kube-rbac-proxy", "manager"]
    else:
        assert "hub-follower" not in init_names and "restartPolicy" not in r.sidecar
        assert names == ["kube-rbac-proxy", "manager", "hub-follower"]


def test_sidecar_env_entries_are_the_workers_own(combo):
    *_, r, plain = combo
    sidecar = by_name(r.sidecar["env"])
    worker = by_name(plain.worker["env"])
    for name in COPIED:
        assert sidecar[name] == worker[name], name
    # valueFrom entries are copied as they are, not resolved.
    assert sidecar["HUB_HOST_ENDPOINT"]["valueFrom"] == {"secretKeyRef": {"name": "kubeslice-hub", "key": "endpoint"}}
    assert sidecar["HUB_SECONDARY_HOST_ENDPOINT"] == {"name": "HUB_SECONDARY_HOST_ENDPOINT", "value": SECONDARY["endpoint"]}


def test_sidecar_reads_the_workers_credential_at_the_workers_path(combo):
    *_, r, _ = combo
    env = chartkit.env(r.sidecar)
    for var in ("HUB_TOKEN_FILE", "HUB_CA_FILE"):
        directory = posixpath.dirname(env[var])
        assert directory == PRIMARY_DIR
        assert mounts(r.sidecar)[directory]["name"] == mounts(r.worker)[directory]["name"] == "hub-secret"
        assert mounts(r.sidecar)[directory]["readOnly"] is True
    for var in ("HUB_SECONDARY_TOKEN_FILE", "HUB_SECONDARY_CA_FILE"):
        directory = posixpath.dirname(env[var])
        assert mounts(r.sidecar)[directory]["name"] == mounts(r.worker)[directory]["name"]
    secret = r.volumes[mounts(r.worker)[posixpath.dirname(env["HUB_SECONDARY_TOKEN_FILE"])]["name"]]["secret"]
    assert secret["secretName"] == SECONDARY["secretName"]


def test_every_mount_has_its_volume(combo):
    *_, r, _ = combo
    names = [v["name"] for v in r.pod["volumes"]]
    assert len(names) == len(set(names))
    for c in r.init_containers + r.containers:
        for m in c.get("volumeMounts") or []:
            assert m["name"] in r.volumes, f"{c['name']} mounts unknown volume {m['name']}"


def test_probes_are_swapped_only_in_liveness_mode(combo):
    _, mode, native, wrapper, r, plain = combo
    if mode == "liveness":
        assert r.worker["livenessProbe"]["httpGet"] == {"path": "/worker/livez", "port": 8095}
        assert (r.worker["livenessProbe"]["periodSeconds"], r.worker["livenessProbe"]["failureThreshold"]) == (2, 3)
        env = chartkit.env(r.sidecar)
        if wrapper:
            # kubeslice-worker's own probe (/healthz on 8081, every 20 s) goes to the sidecar.
            assert (env["HUB_WORKER_PROBE"], env["HUB_WORKER_PROBE_GRACE"]) == ("http://127.0.0.1:8081/healthz", "36s")
            assert r.worker["livenessProbe"]["initialDelaySeconds"] == plain.worker["livenessProbe"]["initialDelaySeconds"]
        else:
            assert "HUB_WORKER_PROBE" not in env
        # A regular sidecar may start late: a startupProbe holds the liveness probe back.
        if not any(c["name"] == "hub-follower" for c in r.init_containers):
            assert r.worker["startupProbe"]["httpGet"] == {"path": "/worker/livez", "port": 8095}
        else:
            assert "startupProbe" not in r.worker
    else:
        assert r.worker["livenessProbe"] == plain.worker["livenessProbe"]
        assert r.worker["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8081}
    assert r.worker["readinessProbe"] == plain.worker["readinessProbe"]


def test_command_is_wrapped_only_with_the_wrapper(combo):
    _, mode, _, wrapper, r, plain = combo
    assert plain.worker["command"] == ["/manager"]
    assert r.worker["args"] == plain.worker["args"]
    if wrapper:
        # In place, the wrapper stops the worker with the pod's grace (the chart's is 10 s).
        in_place = ["--in-place", "--stop-grace", "10s"] if mode == "in-place" else []
        assert r.worker["command"] == ["/opt/hub-follower/hub-follower", "exec", "--wait", "120s", *in_place, "--", "/manager"]
        assert r.installer is not None
        assert mounts(r.worker)["/opt/hub-follower"]["name"] == mounts(r.installer)["/opt/hub-follower"]["name"]
    else:
        assert r.worker["command"] == ["/manager"]
        assert r.installer is None
        assert "hub-follower-bin" not in r.volumes


def test_kube_rbac_proxy_and_the_configmap_are_untouched(combo):
    *_, r, plain = combo
    assert r.container("kube-rbac-proxy") == plain.container("kube-rbac-proxy")
    assert r.kind("ConfigMap") == plain.kind("ConfigMap")
    assert r.kind("Secret") == plain.kind("Secret")
    # The ConfigMap passes through as the text it was written as, not re-serialised
    # (toYaml would sort its keys: data before kind and metadata).
    configmap = [d for d in r.file("operator-deployment.yaml").split("\n---\n") if "kind: ConfigMap" in d]
    plain_configmap = [d for d in plain.file("operator-deployment.yaml").split("\n---\n") if "kind: ConfigMap" in d]
    assert len(configmap) == 1
    assert configmap[0].strip() == plain_configmap[0].strip()


def test_the_workers_metrics_annotations_stay(combo):
    *_, r, plain = combo
    assert r.annotations == plain.annotations == {
        "kubectl.kubernetes.io/default-container": "manager",
        "prometheus.io/port": "8080",
        "prometheus.io/scrape": "true",
    }
    # The sidecar is scrapable by its port name (metrics.podMonitor).
    assert by_name(r.sidecar["ports"])["hub-follower"]["containerPort"] == 8095


def test_only_the_documented_changes_are_made(combo):
    _, mode, _, _, r, plain = combo
    dep, base = r.deployment, plain.deployment
    assert {k: v for k, v in dep.items() if k != "spec"} == {k: v for k, v in base.items() if k != "spec"}
    assert {k: v for k, v in dep["spec"].items() if k != "template"} == {k: v for k, v in base["spec"].items() if k != "template"}
    assert dep["spec"]["template"]["metadata"] == base["spec"]["template"]["metadata"]
    changed_pod = {"containers", "initContainers", "volumes", "shareProcessNamespace"}
    assert {k: v for k, v in r.pod.items() if k not in changed_pod} == {k: v for k, v in plain.pod.items() if k not in changed_pod}
    assert r.pod.get("shareProcessNamespace", False) is (mode == "signal")
    assert r.pod["volumes"][: len(plain.pod["volumes"])] == plain.pod["volumes"]
    worker, before = r.worker, plain.worker
    changed = {"command", "env", "volumeMounts", "livenessProbe", "startupProbe", "securityContext"}
    assert {k: v for k, v in worker.items() if k not in changed} == {k: v for k, v in before.items() if k not in changed}
    assert worker["env"] == before["env"] + [{"name": "HUB_HANDOFF_DIR", "value": "/var/run/hub-follower"}]
    assert worker["volumeMounts"][: len(before["volumeMounts"])] == before["volumeMounts"]
    # Signal mode gives the worker restart.workerUID, since it sets no runAsUser.
    expected_sc = dict(before["securityContext"], **({"runAsUser": 65532} if mode == "signal" else {}))
    assert worker["securityContext"] == expected_sc
    if mode == "signal":
        assert r.sidecar["securityContext"]["runAsUser"] == 65532


@pytest.mark.parametrize("kube", list(K8S))
def test_disabled_output_equals_the_fixtures_own_render(worker_chart, plain_worker_chart, kube):
    off = chartkit.render_files(worker_chart, {"hubFollower": {"enabled": False}}, kube_version=f"{kube}.0")
    default = chartkit.render_files(worker_chart, None, kube_version=f"{kube}.0")
    plain = chartkit.render_files(plain_worker_chart, None, kube_version=f"{kube}.0")
    # The same text, but for the whitespace around it: the define's `{{-`/`-}}` trim the
    # template's leading and trailing whitespace (1.3.1's ends with an empty line), as
    # Helm trims every document it splits off.
    def templates(files):
        return {n.partition("/")[2]: t.strip() for n, t in files.items() if not n.endswith("NOTES.txt")}

    for files in (off, default):
        assert templates(files) == templates(plain)
    # The same objects too, and nothing of hub-follower anywhere.
    assert chartkit.Rendered(off).docs == chartkit.Rendered(plain).docs
    assert "hub-follower" not in "".join(off.values())


def test_native_sidecar_below_1_29_fails_with_the_reason(worker_chart):
    message = chartkit.render_error(worker_chart, values("signal", True, True), kube_version="1.27.0")
    assert "hubFollower.nativeSidecar" in message
    assert "1.29" in message and "v1.27.0" in message


def test_native_sidecar_from_1_29(worker_chart):
    r = chartkit.render(worker_chart, values("signal", None, True), kube_version="1.29.0")
    assert r.sidecar["restartPolicy"] == "Always"
    r = chartkit.render(worker_chart, values("signal", None, True), kube_version="1.28.9")
    assert "restartPolicy" not in r.sidecar
    chartkit.validate_k8s(r.deployment, "1.28")


def test_values_override_the_workers_settings(worker_chart):
    r = chartkit.render(
        worker_chart,
        {"hubFollower": dict(MINIMAL, primary={"endpoint": "https://10.1.80.11:6443"}, clusterName="{{ .Values.cluster.name }}-a",
                             projectNamespaceFrom={"configMapKeyRef": {"name": "hub", "key": "ns"}})},
    )
    env = by_name(r.sidecar["env"])
    assert env["HUB_HOST_ENDPOINT"] == {"name": "HUB_HOST_ENDPOINT", "value": "https://10.1.80.11:6443"}
    assert env["CLUSTER_NAME"] == {"name": "CLUSTER_NAME", "value": "worker-1-a"}
    assert env["HUB_PROJECT_NAMESPACE"]["valueFrom"] == {"configMapKeyRef": {"name": "hub", "key": "ns"}}
    # The worker itself keeps its own settings.
    assert by_name(r.worker["env"])["HUB_HOST_ENDPOINT"]["valueFrom"]["secretKeyRef"]["name"] == "kubeslice-hub"


def test_secondary_endpoint_from_a_secret(worker_chart):
    ref = {"secretKeyRef": {"name": "kubeslice-hub-secondary", "key": "endpoint"}}
    r = chartkit.render(worker_chart, {"hubFollower": dict(MINIMAL, secondary={"endpoint": "", "endpointFrom": ref, "secretName": "kubeslice-hub-secondary"})})
    chartkit.validate_k8s(r.deployment)
    assert by_name(r.sidecar["env"])["HUB_SECONDARY_HOST_ENDPOINT"] == {"name": "HUB_SECONDARY_HOST_ENDPOINT", "valueFrom": ref}


def test_secondary_credential_rendered_from_values(worker_chart):
    # base64 like the kubeslice-worker chart's controllerSecret: no kubectl step.
    secret = {"token": "c2Vjb25kYXJ5LXRva2Vu", "ca.crt": "c2Vjb25kYXJ5LWNh", "endpoint": "aHR0cHM6Ly8xMC4xLjgwLjEyOjY0NDM="}
    r = chartkit.render(
        worker_chart,
        {"hubFollower": {"enabled": True, "secondary": {"secretName": "kubeslice-hub-secondary", "controllerSecret": secret}}},
        kube_version="1.33.0",
    )
    rendered = [s for s in r.kind("Secret") if s["metadata"]["name"] == "kubeslice-hub-secondary"]
    assert len(rendered) == 1
    (s,) = rendered
    chartkit.validate_k8s(s, "1.33")
    assert s["data"] == secret and s["metadata"]["namespace"] == "kubeslice-system"
    # The endpoint comes from the Secret, and the volume mounts the same Secret.
    assert by_name(r.sidecar["env"])["HUB_SECONDARY_HOST_ENDPOINT"]["valueFrom"] == {
        "secretKeyRef": {"name": "kubeslice-hub-secondary", "key": "endpoint"}
    }
    assert r.volumes["hub-follower-secondary-hub"]["secret"]["secretName"] == "kubeslice-hub-secondary"
    # Without controllerSecret nothing of the kind is rendered.
    plain = chartkit.render(worker_chart, {"hubFollower": MINIMAL})
    assert [s["metadata"]["name"] for s in plain.kind("Secret")] == ["kubeslice-hub"]


def test_pod_monitor_scrapes_the_sidecar_port(worker_chart):
    r = chartkit.render(
        worker_chart,
        {"hubFollower": dict(MINIMAL, metrics={"podMonitor": {"enabled": True, "labels": {"release": "kps"}, "interval": "30s"}})},
    )
    (pm,) = r.kind("PodMonitor")
    assert pm["apiVersion"] == "monitoring.coreos.com/v1"
    assert pm["metadata"]["labels"]["release"] == "kps"
    assert pm["metadata"]["namespace"] == r.deployment["metadata"]["namespace"]
    assert pm["spec"]["selector"] == r.deployment["spec"]["selector"]
    # The selector picks the worker's pods, and the endpoint is the sidecar's port.
    labels = r.deployment["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in pm["spec"]["selector"]["matchLabels"].items())
    (endpoint,) = pm["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "hub-follower", "path": "/metrics", "interval": "30s"}
    assert "hub-follower" in by_name(r.sidecar["ports"])
    assert chartkit.render(worker_chart, {"hubFollower": MINIMAL}).kind("PodMonitor") == []


def test_prometheus_rule_comes_with_the_wrap(worker_chart):
    r = chartkit.render(worker_chart, {"hubFollower": dict(MINIMAL, metrics={"prometheusRule": {"enabled": True}})})
    assert len(r.kind("PrometheusRule")) == 1


def test_notes_warn_when_the_wrapper_is_off(worker_chart):
    bare = chartkit.render(worker_chart, values("signal", None, False)).notes
    assert "execWrapper=false is only for a worker that reads the handoff files" in bare
    assert "today's worker-operator doesn't" in bare
    wrapped = chartkit.render(worker_chart, values("signal", None, True)).notes
    assert "execWrapper=false" not in wrapped


def test_another_container_name_is_followed(worker_chart):
    # hubFollower.worker.container picks the worker; here the rbac proxy, to show it.
    r = chartkit.render(worker_chart, {"hubFollower": dict(MINIMAL, worker={"container": "kube-rbac-proxy"}, execWrapper=False,
                                                          primary={"endpoint": "https://10.1.80.11:6443", "volumeName": "hub-secret"}, clusterName="worker-1",
                                                          projectNamespace="kubeslice-demo")})
    r.worker_name = "kube-rbac-proxy"
    assert chartkit.env(r.worker)["HUB_HANDOFF_DIR"] == "/var/run/hub-follower"
    # primary.volumeName mounts that volume at the token file's directory.
    assert mounts(r.sidecar)[PRIMARY_DIR] == {"name": "hub-secret", "mountPath": PRIMARY_DIR, "readOnly": True}
    assert "HUB_HANDOFF_DIR" not in chartkit.env(r.container("manager"))


def test_inject_refuses_a_call_without_manifests(tmp_path):
    chart_dir = chartkit.prepare_fixture(tmp_path)
    deployment = chart_dir / "templates" / "operator-deployment.yaml"
    deployment.write_text(deployment.read_text().replace(chartkit.FIXTURE_WRAP, '{{ include "hub-follower.inject" . }}'))
    with helm.Chart.load(chart_dir) as broken:
        message = chartkit.render_error(broken, {"hubFollower": MINIMAL})
    assert 'hub-follower.inject takes (dict "root" . "manifests"' in message


def test_a_document_that_is_not_yaml_is_named(tmp_path):
    chart_dir = chartkit.prepare_fixture(tmp_path)
    deployment = chart_dir / "templates" / "operator-deployment.yaml"
    deployment.write_text(deployment.read_text().replace("    name: event-schema\n", "    name: event-schema\n   bad: [\n"))
    with helm.Chart.load(chart_dir) as broken:
        message = chartkit.render_error(broken, {"hubFollower": MINIMAL})
    assert "hub-follower.inject: a document in the manifests is not valid YAML" in message


def test_signal_mode_gives_a_worker_without_security_context_its_uid(tmp_path):
    chart_dir = chartkit.prepare_fixture(tmp_path)
    deployment = chart_dir / "templates" / "operator-deployment.yaml"
    text = deployment.read_text()
    block = "        securityContext:\n          allowPrivilegeEscalation: false\n"
    assert text.count(block) == 1
    deployment.write_text(text.replace(block, ""))
    with helm.Chart.load(chart_dir) as chart:
        r = chartkit.render(chart, {"hubFollower": dict(MINIMAL, restart={"mode": "signal", "workerUID": 1001})})
        assert r.worker["securityContext"] == {"runAsUser": 1001}
        assert r.sidecar["securityContext"]["runAsUser"] == 1001
        chartkit.validate_k8s(r.deployment)
        r = chartkit.render(chart, {"hubFollower": dict(MINIMAL, restart={"mode": "liveness", "workerUID": 1001})})
        assert "securityContext" not in r.worker
