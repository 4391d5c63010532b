"""charts/hub-follower-post-renderer: hub-follower on a chart that does not include it.

Helm hands a post-renderer the release's manifests as one stream; the chart runs them
through hub-follower.inject, the same call the patched chart makes. So for the same
values the output must be the documents of the kubeslice-worker fixture with
charts/kubeslice-worker-1.3.1.patch applied. The fixture's plain render stands in for
the published chart, and its documents are concatenated the way Helm concatenates them.
The post-render script runs against a stand-in for helm that records what it is given;
tests/k8s/test_docs_routes.py runs it with the real Helm CLI, as a Helm 4 plugin.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import chartkit

KUBE = "1.33.0"
# restart-all needs 1.35 (and a native sidecar); it is rendered there.
RESTART_ALL_KUBE = f"{chartkit.RESTART_ALL_K8S}.0"
ON = {"hubFollower": {"enabled": True, "secondary": {"endpoint": "https://10.1.80.12:6443", "secretName": "kubeslice-hub-secondary"}}}
COMBOS = [c for c in itertools.product(chartkit.MODES, (True, False), (True, False))
          if chartkit.refusal(c[0], c[1], RESTART_ALL_KUBE, c[2]) is None]


def kube_for(mode: str) -> str:
    return RESTART_ALL_KUBE if mode == "restart-all" else KUBE
# Everything the wrap can add after the parent's documents, each named after the release.
EXTRAS = {"hubFollower": {
    "metrics": {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}},
    "dashboard": {"enabled": True},
    "secondary": {"controllerSecret": {"token": "dG9rZW4=", "ca.crt": "Y2E="}},
}}


def combo_id(c) -> str:
    mode, native, wrapper = c
    return f"{mode}-{'native' if native else 'regular'}-{'wrapped' if wrapper else 'bare'}"


def docs(files: dict[str, str]) -> list[dict]:
    return chartkit.Rendered(files).docs


def post_renderer_stream(plain_worker_chart, values: dict, kube: str = KUBE) -> str:
    return chartkit.post_renderer_input(chartkit.render_files(plain_worker_chart, values, kube_version=kube))


def post_rendered(post_renderer_chart, plain_worker_chart, values: dict, kube: str = KUBE) -> list[dict]:
    stream = post_renderer_stream(plain_worker_chart, values, kube)
    return docs(chartkit.render_files(post_renderer_chart, dict(values, manifests=stream), kube_version=kube))


@pytest.mark.parametrize("combo", COMBOS, ids=[combo_id(c) for c in COMBOS])
def test_output_equals_the_patched_charts(combo, post_renderer_chart, plain_worker_chart, worker_chart):
    mode, native, wrapper = combo
    kube = kube_for(mode)
    values = chartkit.deep_merge(ON, chartkit.mode_values(mode, native, wrapper))
    got = post_rendered(post_renderer_chart, plain_worker_chart, values, kube)
    expected = docs(chartkit.render_files(worker_chart, values, kube_version=kube))
    assert chartkit.as_multiset(got) == chartkit.as_multiset(expected)
    # Not equal by accident: the sidecar is there.
    assert any(c["name"] == "hub-follower" for d in got if d["kind"] == "Deployment"
               for c in d["spec"]["template"]["spec"].get("initContainers", []) + d["spec"]["template"]["spec"]["containers"])


def test_restart_all_gets_its_rule_through_the_post_renderer(post_renderer_chart, plain_worker_chart):
    values = chartkit.deep_merge(ON, {"hubFollower": {"restart": {"mode": "restart-all", "exitCode": 77}}})
    got = post_rendered(post_renderer_chart, plain_worker_chart, values, RESTART_ALL_KUBE)
    (deployment,) = [d for d in got if d["kind"] == "Deployment"]
    (sidecar,) = [c for c in deployment["spec"]["template"]["spec"]["initContainers"] if c["name"] == "hub-follower"]
    assert sidecar["restartPolicy"] == "Always"
    assert sidecar["restartPolicyRules"] == [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [77]}}]
    for d in got:
        chartkit.validate_k8s(d, chartkit.RESTART_ALL_K8S)


@pytest.mark.parametrize("native,kube,refused", [
    (None, KUBE, chartkit.RESTART_ALL_BELOW_1_35),
    (False, RESTART_ALL_KUBE, chartkit.RESTART_ALL_REGULAR),
], ids=["below-1.35", "regular-sidecar"])
def test_restart_all_is_refused_by_the_post_renderer_as_by_the_patched_chart(post_renderer_chart, plain_worker_chart, worker_chart,
                                                                            native, kube, refused):
    values = chartkit.deep_merge(ON, chartkit.mode_values("restart-all", native, True))
    if native is None:
        del values["hubFollower"]["nativeSidecar"]
    stream = post_renderer_stream(plain_worker_chart, values, kube)
    message = chartkit.render_error(post_renderer_chart, dict(values, manifests=stream), kube_version=kube)
    assert refused in message, message
    assert refused in chartkit.render_error(worker_chart, values, kube_version=kube)


def test_output_equals_the_patched_charts_with_every_extra_document(post_renderer_chart, plain_worker_chart, worker_chart):
    values = chartkit.deep_merge(ON, EXTRAS)
    got = post_rendered(post_renderer_chart, plain_worker_chart, values)
    expected = docs(chartkit.render_files(worker_chart, values, kube_version=KUBE))
    assert chartkit.as_multiset(got) == chartkit.as_multiset(expected)
    assert {"PodMonitor", "PrometheusRule", "Role", "RoleBinding"} <= {d["kind"] for d in got}
    # The dashboard's ConfigMap and the secondary Secret.
    assert len([d for d in got if d["kind"] == "ConfigMap"]) == 2
    assert len([d for d in got if d["kind"] == "Secret"]) == 2


def test_disabled_passes_the_manifests_through(post_renderer_chart, plain_worker_chart):
    plain = chartkit.render_files(plain_worker_chart, None, kube_version=KUBE)
    got = post_rendered(post_renderer_chart, plain_worker_chart, {"hubFollower": {"enabled": False}})
    assert chartkit.as_multiset(got) == chartkit.as_multiset(docs(plain))


def test_manifests_without_the_worker_fail_with_the_injects_message(post_renderer_chart, plain_worker_chart):
    files = chartkit.render_files(plain_worker_chart, None, kube_version=KUBE)
    stream = chartkit.post_renderer_input({n: t for n, t in files.items() if not n.endswith("operator-deployment.yaml")})
    assert "kind: Secret" in stream
    message = chartkit.render_error(post_renderer_chart, dict(ON, manifests=stream), kube_version=KUBE)
    assert 'hub-follower.inject: no Deployment or StatefulSet in the manifests has a container named "manager"' in message
    assert "they hold only: Secret kubeslice-hub." in message


@pytest.mark.parametrize("values", [ON, {"hubFollower": {"enabled": False}}], ids=["enabled", "disabled"])
def test_no_manifests_fail_with_a_message_saying_how_to_run_it(post_renderer_chart, values):
    for given in (values, dict(values, manifests="")):
        message = chartkit.render_error(post_renderer_chart, given, kube_version=KUBE)
        assert "hub-follower-post-renderer: no manifests" in message
        assert "--set-file manifests=<file>" in message


# A stand-in for helm: records its argv, the manifests file it was given and whether
# that file still exists, prints a line, and exits with FAKE_HELM_EXIT.
FAKE_HELM = f"""#!{sys.executable}
import json, os, sys
args = sys.argv[1:]
path = next(a.split("=", 1)[1] for a in args if a.startswith("manifests="))
with open(os.environ["FAKE_HELM_RECORD"], "w") as out:
    json.dump({{"argv": args, "path": path, "manifests": open(path).read()}}, out)
print("rendered by the fake helm")
sys.exit(int(os.environ.get("FAKE_HELM_EXIT", "0")))
"""


def run_post_render(tmp_path: Path, stdin: str, *args: str, exit_code: int = 0) -> tuple[subprocess.CompletedProcess, dict]:
    fake = tmp_path / "fake-helm"
    fake.write_text(FAKE_HELM)
    fake.chmod(0o755)
    record = tmp_path / "record.json"
    env = dict(os.environ, HELM=str(fake), FAKE_HELM_RECORD=str(record), FAKE_HELM_EXIT=str(exit_code), TMPDIR=str(tmp_path))
    done = subprocess.run([str(chartkit.POST_RENDERER / "post-render"), *args], input=stdin, env=env,
                          capture_output=True, text=True, timeout=60)
    return done, json.loads(record.read_text())


def test_post_render_passes_stdin_and_its_arguments_to_helm_template(tmp_path):
    stream = "---\n# Source: kubeslice-worker/templates/hub-secret.yaml\napiVersion: v1\nkind: Secret\n"
    args = ("-f", "values.yaml", "--name-template", "kubeslice-worker", "--namespace", "kubeslice-system", "--kube-version", "1.33.0")
    done, seen = run_post_render(tmp_path, stream, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "rendered by the fake helm\n"
    assert seen["argv"] == ["template", str(chartkit.POST_RENDERER), "--set-file", f"manifests={seen['path']}", *args]
    assert seen["manifests"] == stream
    # The manifests file was in TMPDIR, and is gone once helm is done.
    assert Path(seen["path"]).parent == tmp_path
    assert not Path(seen["path"]).exists()


def test_post_render_fails_when_helm_does_and_still_removes_the_file(tmp_path):
    done, seen = run_post_render(tmp_path, "kind: Secret\n", exit_code=3)
    assert done.returncode == 3
    assert not Path(seen["path"]).exists()


def test_post_render_is_an_executable_posix_sh_script():
    script = chartkit.POST_RENDERER / "post-render"
    assert script.stat().st_mode & stat.S_IXUSR
    assert script.read_text().startswith("#!/bin/sh\n")
    subprocess.run(["sh", "-n", str(script)], check=True)


def test_the_helm_4_plugin_runs_the_script():
    plugin = yaml.safe_load((chartkit.POST_RENDERER / "plugin.yaml").read_text())
    assert (plugin["apiVersion"], plugin["type"], plugin["runtime"]) == ("v1", "postrenderer/v1", "subprocess")
    (command,) = plugin["runtimeConfig"]["platformCommand"]
    assert command == {"command": "${HELM_PLUGIN_DIR}/post-render"}
