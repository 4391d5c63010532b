"""hubFollower.overrides: pin and drain from pod annotations (the binary's HUB_OVERRIDE_DIR).

With overrides.enabled (the default) and two hubs or more (a secondary, or any entry of
hubFollower.hubs), the pod gets the downward-API volume hub-follower-overrides with the
files `pin` and `drain` from the annotations hub-follower.kubeslice.io/pin and /drain,
the sidecar alone mounts it read-only at /etc/hub-follower/overrides, and the sidecar
alone gets HUB_OVERRIDE_DIR pointing there. With one hub, or overrides.enabled: false,
none of it, and nothing else changes: a render with overrides, less exactly those
additions, is the render without them. The example chart is rendered at Kubernetes
1.35 in every restart mode with the native sidecar on and off and the wrapper on and
off, the kubeslice-worker fixture at 1.33 and 1.27, and the post-renderer; every
manifest is validated with kubernetes-validate.
"""

from __future__ import annotations

import copy
import itertools

import helm_python as helm
import pytest

import chartkit
from chartkit import env, hf, mounts

KUBE = f"{chartkit.CURRENT_K8S}.0"
VOLUME = "hub-follower-overrides"
DIR = "/etc/hub-follower/overrides"
EXPECTED_VOLUME = {
    "name": VOLUME,
    "downwardAPI": {
        "defaultMode": 0o444,
        "items": [
            {"path": "pin", "fieldRef": {"fieldPath": "metadata.annotations['hub-follower.kubeslice.io/pin']"}},
            {"path": "drain", "fieldRef": {"fieldPath": "metadata.annotations['hub-follower.kubeslice.io/drain']"}},
        ],
    },
}
HUB_3 = {"name": "hub-3", "endpoint": "https://hub-3.example.com:6443", "secretName": "kubeslice-hub-3-token"}
SINGLE_HUB = {"endpoint": "", "secretName": "", "tlsServerName": ""}
SECONDARY = {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}
OFF = {"enabled": False}

ALL = [c for c in itertools.product(chartkit.MODES, (True, False), (True, False)) if chartkit.refusal(c[0], c[1], KUBE, c[2]) is None]


def combo_id(c) -> str:
    m, n, w = c
    return f"{m}-{'native' if n else 'regular'}-{'wrapped' if w else 'bare'}"


def assert_overrides_wired(r: chartkit.Rendered) -> None:
    """The volume is exact, the sidecar alone mounts it (read-only, at DIR) and alone
    has HUB_OVERRIDE_DIR."""
    assert r.volumes[VOLUME] == EXPECTED_VOLUME
    names = [v["name"] for v in r.pod["volumes"]]
    assert names.count(VOLUME) == 1
    sidecar = r.sidecar
    (mount,) = [m for m in sidecar["volumeMounts"] if m["name"] == VOLUME]
    assert mount == {"name": VOLUME, "mountPath": DIR, "readOnly": True}
    (entry,) = [e for e in sidecar["env"] if e["name"] == "HUB_OVERRIDE_DIR"]
    assert entry == {"name": "HUB_OVERRIDE_DIR", "value": DIR}
    for c in r.init_containers + r.containers:
        if c is sidecar:
            continue
        assert all(m["name"] != VOLUME for m in c.get("volumeMounts") or []), c["name"]
        assert DIR not in mounts(c), c["name"]
        assert "HUB_OVERRIDE_DIR" not in env(c), c["name"]


def assert_no_overrides(r: chartkit.Rendered) -> None:
    assert VOLUME not in r.volumes
    for c in r.init_containers + r.containers:
        assert all(m["name"] != VOLUME for m in c.get("volumeMounts") or []), c["name"]
        assert "HUB_OVERRIDE_DIR" not in env(c), c["name"]


def strip_overrides(r: chartkit.Rendered) -> list[dict]:
    """The documents less what overrides add: the volume, its mount, HUB_OVERRIDE_DIR."""
    docs = copy.deepcopy(r.docs)
    for doc in docs:
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = doc["spec"]["template"]["spec"]
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] != VOLUME]
        for c in (pod.get("initContainers") or []) + pod["containers"]:
            if "env" in c:
                c["env"] = [e for e in c["env"] if e["name"] != "HUB_OVERRIDE_DIR"]
            if "volumeMounts" in c:
                c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != VOLUME]
    return docs


@pytest.mark.parametrize("mode,native,wrapper", ALL, ids=[combo_id(c) for c in ALL])
def test_the_sidecar_alone_reads_the_annotations_in_every_mode(chart, mode, native, wrapper):
    r = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper), kube_version=KUBE)
    for doc in r.docs:
        chartkit.validate_k8s(doc)
    assert_overrides_wired(r)
    # Where the sidecar is: a native sidecar is an init container, a regular one a container.
    assert (r.sidecar in r.init_containers) is native


@pytest.mark.parametrize("mode,native,wrapper", ALL, ids=[combo_id(c) for c in ALL])
def test_overrides_add_only_their_volume_mount_and_env(chart, mode, native, wrapper):
    on = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper), kube_version=KUBE)
    off = chartkit.render(chart, chartkit.mode_values(mode, native, wrapper, overrides=OFF), kube_version=KUBE)
    assert_no_overrides(off)
    assert strip_overrides(on) == off.docs
    assert on.notes != off.notes and "hub-follower.kubeslice.io/drain" in on.notes
    assert "hub-follower.kubeslice.io" not in off.notes


def test_on_by_default(chart):
    defaults = chartkit.render(chart)
    explicit = chartkit.render(chart, hf(overrides={"enabled": True}))
    assert defaults.files == explicit.files
    assert_overrides_wired(defaults)


def test_listed_hubs_without_a_secondary_are_two_hubs_too(chart):
    r = chartkit.render(chart, hf(secondary=SINGLE_HUB, hubs=[HUB_3]), kube_version=KUBE)
    for doc in r.docs:
        chartkit.validate_k8s(doc)
    assert_overrides_wired(r)
    # With the secondary and listed hubs, still one volume.
    assert_overrides_wired(chartkit.render(chart, hf(hubs=[HUB_3]), kube_version=KUBE))


@pytest.mark.parametrize("native", [True, False], ids=["native", "regular"])
@pytest.mark.parametrize("enabled", [True, False])
def test_nothing_with_one_hub(chart, native, enabled):
    # The binary ignores overrides with one hub; single-hub mode gets nothing.
    r = chartkit.render(chart, chartkit.mode_values("signal", native, True, secondary=SINGLE_HUB, overrides={"enabled": enabled}), kube_version=KUBE)
    assert_no_overrides(r)
    assert "hub-follower.kubeslice.io" not in r.notes
    # overrides.enabled changes nothing in single-hub mode.
    other = chartkit.render(chart, chartkit.mode_values("signal", native, True, secondary=SINGLE_HUB, overrides={"enabled": not enabled}), kube_version=KUBE)
    assert other.files == r.files


@pytest.mark.parametrize("kube", ["1.33", "1.27"])
def test_the_kubeslice_worker_fixture(worker_chart, kube):
    values = {"hubFollower": {"enabled": True, "secondary": SECONDARY}}
    r = chartkit.render(worker_chart, values, kube_version=f"{kube}.0")
    for doc in r.docs:
        chartkit.validate_k8s(doc, kube)
    assert_overrides_wired(r)
    off = chartkit.render(worker_chart, {"hubFollower": dict(values["hubFollower"], overrides=OFF)}, kube_version=f"{kube}.0")
    assert_no_overrides(off)
    assert strip_overrides(r) == off.docs
    # kube-rbac-proxy gets nothing.
    assert r.container("kube-rbac-proxy") == off.container("kube-rbac-proxy")
    # Single-hub mode on the fixture: nothing.
    assert_no_overrides(chartkit.render(worker_chart, {"hubFollower": {"enabled": True}}, kube_version=f"{kube}.0"))


def test_the_post_renderer_gives_the_same_documents(post_renderer_chart, plain_worker_chart, worker_chart):
    values = {"hubFollower": {"enabled": True, "secondary": SECONDARY}}
    manifests = chartkit.post_renderer_input(chartkit.render_files(plain_worker_chart, None, kube_version="1.33.0"))
    out = chartkit.render(post_renderer_chart, dict(values, manifests=manifests), kube_version="1.33.0")
    patched = chartkit.render(worker_chart, values, kube_version="1.33.0")
    assert chartkit.as_multiset(out.docs) == chartkit.as_multiset(patched.docs)
    assert_overrides_wired(out)


@pytest.mark.parametrize(
    "values,field,constraint",
    [
        (hf(overrides={"enabled": "yes"}), "/overrides/enabled", "want boolean"),
        (hf(overrides={"enabled": 1}), "/overrides/enabled", "want boolean"),
        (hf(overrides={"enabled": True, "dir": "/tmp"}), "/overrides", "'dir' not allowed"),
        (hf(overrides=True), "/overrides", "want object"),
    ],
    ids=["string", "number", "unknown-key", "not-a-map"],
)
def test_schema_refuses_a_bad_value_naming_it(chart, values, field, constraint):
    with pytest.raises(helm.HelmValuesError) as caught:
        chart.render(values, name=chartkit.RELEASE, namespace=chartkit.NAMESPACE)
    message = str(caught.value)
    assert "hubFollower" in message and field in message and constraint in message, message


@pytest.fixture(scope="module")
def unchecked_chart(tmp_path_factory):
    """The example chart without the library's schema, as `--skip-schema-validation`
    renders it."""
    example = chartkit.prepare_charts(tmp_path_factory.mktemp("unchecked-overrides"), without_schema=True)
    with helm.Chart.load(example) as unchecked:
        yield unchecked


@pytest.mark.parametrize("value", ["yes", "false", 1])
def test_templates_refuse_a_non_boolean_without_the_schema(unchecked_chart, value):
    # "false" as a string would be true to the template: refused, not taken as on.
    message = chartkit.render_error(unchecked_chart, hf(overrides={"enabled": value}))
    assert f"hubFollower.overrides.enabled: {value} must be true or false" in message, message
