"""The docs' install routes and day-2 commands, run from the docs' own text.

README.md's install is the patch route in nine commands; docs/helm.md gives two ways onto the published kubeslice-worker chart (the patch, and the
post-renderer as a Helm 4 plugin), an Argo CD Config Management Plugin and a Flux
HelmRelease of the patched chart; docs/operations.md
gives each day-2 command (the install, a new image, the dashboard, another restart mode,
hub-follower off, a rollback) in a form for each route. Each test here takes those `sh`
blocks out of the Markdown and runs them with bash, in a working directory laid out as
helm.md says, with the real Helm CLI (built from its Go module by build.sh) and kubectl,
against a real kube-apiserver. After each command it reads back what the command changed.

What differs from a user's machine, and only that:
- README's `git clone` of this repository is left out: the working directory gets the
  checkout's charts copied in, where the clone would put them;
- the chart repository: `https://kubeslice.github.io/kubeslice/` is replaced by a local
  one serving the kubeslice-worker-shaped fixture (tests/chart/fixtures) as
  `kubeslice-worker` 1.3.1 (there is no network here);
- `<new version>` and `<revision>` get values, and `token`/`ca.crt` are stand-ins;
- lines that need a running pod (`rollout status`, `kubectl exec`) are left out: this API
  server has no node. The node tests run the sidecar itself;
- Argo CD's plugin runs its `init` and `generate` commands as Argo CD would, and Flux's
  HelmRelease is rendered with its chart path and values as the helm-controller would:
  neither Argo CD nor Flux runs here (Flux's controller module is not on the module proxy).
A doc change that breaks a command fails here.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml

from kube import BIN, REPO, ControlPlane, Pki

README_MD = REPO / "README.md"
HELM_MD = REPO / "docs" / "helm.md"
CLONE = "git clone https://github.com/kubeslice/hub-follower\n"
OPERATIONS_MD = REPO / "docs" / "operations.md"
FIXTURE = REPO / "tests" / "chart" / "fixtures" / "kubeslice-worker"
PUBLISHED = "https://kubeslice.github.io/kubeslice/"
NS = "kubeslice-system"
NEW_TAG = "0.1.1-docs"
SECONDARY = "https://10.1.80.12:6443"  # the docs' values

PATCH, POST_RENDERER = "patch", "post-renderer"
FORM_HEADS = {
    "# A chart that includes hub-follower:": PATCH,
    "# Or, the post-renderer:": POST_RENDERER,
    '# Or, the post-renderer (the value goes to it; see "Upgrade and rollback"):': POST_RENDERER,
    "# Then, either way:": "then",
}
# The commands that need a running pod; this API server has no node.
NEEDS_A_POD = re.compile(r"^\s*kubectl (?:-n \S+ )?(?:rollout status|exec)\b")


def sh_blocks(path: Path) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", path.read_text(), re.S | re.M)


def block_with(path: Path, *needles: str) -> str:
    found = [b for b in sh_blocks(path) if all(n in b for n in needles)]
    assert len(found) == 1, f"{path.name}: expected one sh block with {needles}, found {len(found)}"
    return found[0]


def route_forms(block: str) -> dict[str, str]:
    """A day-2 block split at its `# A chart that includes hub-follower:`, `# Or, the
    post-renderer:` and `# Then, either way:` lines."""
    forms: dict[str, list[str]] = {}
    current = None
    for line in block.splitlines():
        if line in FORM_HEADS:
            current = FORM_HEADS[line]
            forms[current] = []
        elif current is not None:
            forms[current].append(line)
    assert {PATCH, POST_RENDERER} <= forms.keys(), f"a day-2 block without both forms:\n{block}"
    return {k: "\n".join(v) + "\n" for k, v in forms.items()}


def day_2_blocks() -> dict[str, dict[str, str]]:
    """operations.md's day-2 blocks, by the hubFollower setting each changes."""
    blocks = {}
    for block in sh_blocks(OPERATIONS_MD):
        if "# A chart that includes hub-follower:" not in block:
            continue
        (setting,) = set(re.findall(r"--set[ =](hubFollower\.[\w.]+)=", block))
        blocks[setting] = route_forms(block)
    return blocks


def without_pod_commands(commands: str) -> str:
    kept = []
    for line in commands.splitlines():
        if NEEDS_A_POD.match(line):
            assert not line.rstrip().endswith("\\"), f"a pod command over several lines: {line}"
            continue
        kept.append(line)
    return "\n".join(kept) + "\n"


def docs_values() -> str:
    """The values of helm.md section 1, the user's values.yaml of every route."""
    blocks = re.findall(r"^```yaml\n(hubFollower:\n.*?)^```", HELM_MD.read_text(), re.S | re.M)
    assert blocks, "docs/helm.md shows no hubFollower values"
    assert SECONDARY in blocks[0]
    return blocks[0]


class ChartRepository:
    """A Helm chart repository on 127.0.0.1 serving the fixture as kubeslice-worker 1.3.1."""

    def __init__(self, root: Path, helm: Callable[..., str]):
        chart = root / "src" / "kubeslice-worker"
        shutil.copytree(FIXTURE, chart)
        manifest = chart / "Chart.yaml"
        text = manifest.read_text()
        assert "\nname: kubeslice-worker-shape\n" in text
        manifest.write_text(text.replace("\nname: kubeslice-worker-shape\n", "\nname: kubeslice-worker\n"))
        self.dir = root / "repo"
        self.dir.mkdir()
        helm("package", str(chart), "-d", str(self.dir))
        handler = functools.partial(Quiet, directory=str(self.dir))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        helm("repo", "index", str(self.dir), "--url", self.url)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class Operator:
    """A user's shell in the working directory docs/helm.md lays out: values.yaml, charts/ and
    a checkout named hub-follower; Helm's own directories kept inside the test's."""

    def __init__(self, root: Path, plane: ControlPlane):
        self.root = root
        self.work = root / "work"
        checkout = self.work / "hub-follower"
        tracked = subprocess.run(["git", "ls-files", "charts"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
        assert tracked, "git ls-files charts: nothing"
        for name in tracked:
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, checkout / name)
        (self.work / "values.yaml").write_text(docs_values())
        # The secondary hub's credential, as helm.md section 4 reads it from that hub.
        (self.work / "token").write_text("stand-in-token")
        (self.work / "ca.crt").write_text("stand-in-ca")
        helm_home = root / "helm-home"
        self.env = {
            **os.environ,
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "KUBECONFIG": str(plane.kubeconfig),
            "HELM_CONFIG_HOME": str(helm_home / "config"),
            "HELM_CACHE_HOME": str(helm_home / "cache"),
            "HELM_DATA_HOME": str(helm_home / "data"),
        }
        assert (BIN / "helm").is_file(), "no helm in target/k8s/bin: tests/k8s/build.sh builds it"
        self.repo = ChartRepository(root / "chart-repo", self.helm)

    def helm(self, *args: str) -> str:
        return self.run_argv([str(BIN / "helm"), *args])

    def run_argv(self, argv: list[str]) -> str:
        r = subprocess.run(argv, cwd=self.work, env=self.env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{argv} failed ({r.returncode}):\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return r.stdout

    def script(self, commands: str, **values: str) -> subprocess.CompletedProcess:
        text = without_pod_commands(commands).replace(PUBLISHED, self.repo.url)
        for placeholder, value in values.items():
            assert f"<{placeholder}>" in text, f"no <{placeholder}> in:\n{commands}"
            text = text.replace(f"<{placeholder}>", value)
        assert "<" not in re.sub(r"<<'?EOF'?|<\(|2>&1|>/dev/null", "", text), f"a placeholder is left:\n{text}"
        return subprocess.run(["bash", "-c", f"set -euo pipefail\n{text}"], cwd=self.work, env=self.env,
                              capture_output=True, text=True, timeout=300)

    def run(self, commands: str, **values: str) -> str:
        r = self.script(commands, **values)
        assert r.returncode == 0, f"the docs' commands failed ({r.returncode}):\n{commands}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
        return r.stdout

    def kubectl_json(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run_argv(["kubectl", "-n", NS, *args, "-o", "json"]))

    def operator(self) -> dict[str, Any]:
        return self.kubectl_json("get", "deployment", "kubeslice-operator")

    def revision(self) -> int:
        (release,) = json.loads(self.helm("list", "-n", NS, "-o", "json"))
        return int(release["revision"])

    def stop(self) -> None:
        self.repo.stop()


def containers(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    spec = deployment["spec"]["template"]["spec"]
    return {c["name"]: c for c in spec.get("initContainers", []) + spec["containers"]}


def sidecar(deployment: dict[str, Any]) -> dict[str, Any] | None:
    return containers(deployment).get("hub-follower")


def sidecar_env(deployment: dict[str, Any]) -> dict[str, str]:
    side = sidecar(deployment)
    assert side is not None, "the worker's pod has no hub-follower container"
    return {e["name"]: e.get("value", "") for e in side.get("env", [])}


def has_the_sidecar_for_the_docs_values(deployment: dict[str, Any]) -> None:
    env = sidecar_env(deployment)
    assert SECONDARY in json.dumps(env), env
    volumes = {v["name"] for v in deployment["spec"]["template"]["spec"].get("volumes", [])}
    assert any(v.startswith("hub-follower") for v in volumes), volumes


@pytest.fixture
def operator(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Operator]:
    root = tmp_path_factory.mktemp("docs-routes")
    plane = ControlPlane(f"docs-{request.node.name[-20:]}", root / "plane", Pki(root / "pki"))
    op = None
    try:
        plane.start()
        op = Operator(root, plane)
        # The worker's namespace, which the Secret of "Installing" goes into before the install.
        op.run_argv(["kubectl", "create", "namespace", NS])
        yield op
    finally:
        if op is not None:
            op.stop()
        plane.stop()


def run_day_2(op: Operator, route: str) -> None:
    """Every day-2 command of operations.md in the route's form, each checked in the API server."""
    blocks = day_2_blocks()
    assert set(blocks) == {"hubFollower.image.tag", "hubFollower.dashboard.enabled",
                           "hubFollower.restart.mode", "hubFollower.enabled"}, set(blocks)

    before = op.revision()
    op.run(blocks["hubFollower.image.tag"][route], **{"new version": NEW_TAG})
    assert sidecar(op.operator())["image"].endswith(f":{NEW_TAG}")
    assert op.revision() == before + 1

    forms = blocks["hubFollower.dashboard.enabled"]
    op.run(forms[route])
    shown = op.run(forms["then"])
    assert "grafana_dashboard=1" in shown, shown
    assert sidecar(op.operator())["image"].endswith(":0.1.0"), "a later upgrade keeps an earlier --set"

    op.run(blocks["hubFollower.restart.mode"][route])
    assert sidecar_env(op.operator())["HUB_RESTART_MODE"] == "liveness"

    op.run(blocks["hubFollower.enabled"][route])
    off = op.operator()
    assert sidecar(off) is None, "hubFollower.enabled=false left the sidecar"
    assert "hub-follower" not in json.dumps(off["spec"]["template"]), "enabled=false left hub-follower in the pod"

    # Rollback to the install's revision brings the sidecar back, on either route.
    op.run(block_with(OPERATIONS_MD, "helm rollback kubeslice-worker <revision>"), revision="1")
    has_the_sidecar_for_the_docs_values(op.operator())


def test_the_readme_install_as_written(operator: Operator):
    """README.md's install: its values, then its commands, as a new user runs them."""
    op = operator
    (values,) = [b for b in re.findall(r"^```yaml\n(.*?)^```", README_MD.read_text(), re.S | re.M) if "hubFollower:" in b]
    (op.work / "values.yaml").write_text(values)
    install = block_with(README_MD, "helm upgrade --install", "git apply")
    assert install.startswith(CLONE), install
    op.run(install[len(CLONE):])
    installed = op.operator()
    has_the_sidecar_for_the_docs_values(installed)
    secret = op.kubectl_json("get", "secret", "kubeslice-hub-secondary-token")
    assert set(secret["data"]) == {"token", "ca.crt"}
    assert op.revision() == 1
    # A later upgrade is the same command, and changes nothing.
    upgrade = [line for line in install.splitlines() if line.startswith("helm upgrade --install")]
    op.run("\n".join(upgrade))
    assert op.revision() == 2
    assert op.operator()["spec"]["template"] == installed["spec"]["template"]


def test_the_patch_route_and_every_day_2_command_as_written(operator: Operator):
    op = operator
    op.run(block_with(HELM_MD, "git apply ../../hub-follower/charts/kubeslice-worker-1.3.1.patch"))
    installed = op.operator()
    has_the_sidecar_for_the_docs_values(installed)
    assert op.revision() == 1

    # operations.md "Installing": the secondary's Secret, then the upgrade of the same release.
    op.run(block_with(OPERATIONS_MD, "create secret generic kubeslice-hub-secondary-token", "helm upgrade --install"))
    secret = op.kubectl_json("get", "secret", "kubeslice-hub-secondary-token")
    assert set(secret["data"]) == {"token", "ca.crt"}
    assert op.operator()["spec"]["template"] == installed["spec"]["template"]

    # Flux: the HelmRelease's chart, at its path in this layout, with its values, rendered as
    # the helm-controller renders it (Flux itself does not run here).
    flux = [yaml.safe_load_all(b) for b in re.findall(r"^```yaml\n(.*?)^```", HELM_MD.read_text(), re.S | re.M)
            if "kind: HelmRelease" in b]
    assert len(flux) == 1, "docs/helm.md: expected one Flux block"
    (release,) = [d for d in flux[0] if d["kind"] == "HelmRelease"]
    spec = release["spec"]["chart"]["spec"]
    chart = op.work / spec["chart"]
    assert (chart / "Chart.yaml").is_file(), f"the HelmRelease's chart {spec['chart']} is not where the patch route puts it"
    assert spec["sourceRef"]["kind"] == "GitRepository"
    values = op.work / "flux-values.yaml"
    values.write_text(yaml.safe_dump(release["spec"]["values"]))
    rendered = op.helm("template", release["metadata"]["name"], str(chart), "-n", release["metadata"]["namespace"],
                       "-f", str(values), "--kube-version", "1.35.0")
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    has_the_sidecar_for_the_docs_values(deployment)

    run_day_2(op, PATCH)


def test_the_post_renderer_route_and_every_day_2_command_as_written(operator: Operator):
    op = operator
    op.run(block_with(HELM_MD, "helm plugin install", "--post-renderer hub-follower"))
    has_the_sidecar_for_the_docs_values(op.operator())
    release = op.helm("get", "manifest", "kubeslice-worker", "-n", NS)

    # Argo CD: the Config Management Plugin's init and generate, in a source directory
    # holding values.yaml and the two charts, give what the post-renderer installed.
    (cmp,) = [yaml.safe_load(b) for b in re.findall(r"^```yaml\n(.*?)^```", HELM_MD.read_text(), re.S | re.M)
              if "kind: ConfigManagementPlugin" in b]
    source = op.root / "argocd-source"
    (source / "charts").mkdir(parents=True)
    shutil.copy(op.work / "values.yaml", source / "values.yaml")
    for chart in ("hub-follower", "hub-follower-post-renderer"):
        shutil.copytree(op.work / "hub-follower" / "charts" / chart, source / "charts" / chart,
                        ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    argo_env = {**op.env, "ARGOCD_APP_NAME": "kubeslice-worker", "ARGOCD_APP_NAMESPACE": NS, "KUBE_VERSION": "1.35.0"}
    outputs = []
    for step in ("init", "generate"):
        argv = cmp["spec"][step]["command"] + [a.replace(PUBLISHED, op.repo.url) for a in cmp["spec"][step]["args"]]
        r = subprocess.run(argv, cwd=source, env=argo_env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"Argo CD's {step} failed:\n{r.stderr}"
        outputs.append(r.stdout)
    generated = [d for d in yaml.safe_load_all(outputs[1]) if d]
    assert sorted(map(json.dumps, generated)) == sorted(json.dumps(d) for d in yaml.safe_load_all(release) if d)

    # "When it fails": Helm 4 hides the plugin's message; the docs' command shows it.
    built = op.work / "hub-follower" / "charts" / "hub-follower-post-renderer" / "charts"
    aside = op.root / "charts-aside"
    built.rename(aside)
    try:
        # The install block's helm install, as an upgrade of the same release.
        install = block_with(HELM_MD, "helm plugin install", "--post-renderer hub-follower")
        upgrade = "helm upgrade " + install.split("\nhelm install ", 1)[1]
        again = op.script(upgrade)
        assert again.returncode != 0
        assert 'plugin "hub-follower" exited with error' in again.stderr, again.stderr
        diagnosis = op.script(block_with(HELM_MD, "post-render -f values.yaml"))
        assert diagnosis.returncode != 0
        assert "hub-follower" in diagnosis.stderr and "charts" in diagnosis.stderr, diagnosis.stderr
    finally:
        aside.rename(built)

    run_day_2(op, POST_RENDERER)
