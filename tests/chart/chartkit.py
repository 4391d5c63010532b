"""Render the hub-follower charts with the Helm v4 SDK and take the result apart.

Helm comes from the `helm-python-sdk` wheel (import name `helm_python`), which wraps
Helm's Go library: no helm binary and no cluster. The example chart depends on the
library through `file://../hub-follower`; `prepare_charts` resolves that offline in a
temporary copy, so the repository's chart directories are never written to.
"""

from __future__ import annotations

import copy
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parents[2]
CHARTS = REPO / "charts"
LIBRARY = CHARTS / "hub-follower"
EXAMPLE = CHARTS / "hub-follower-example"
DOCS = REPO / "docs" / "helm.md"

# A current Kubernetes for validation, and the newest one without native sidecars
# (restartPolicy on a container appeared in 1.28 and is on by default from 1.29).
CURRENT_K8S = "1.35"
PRE_SIDECAR_K8S = "1.27"

RELEASE = "demo"
NAMESPACE = "kubeslice-system"

MODES = ("signal", "liveness", "none")


def prepare_charts(workdir: Path, *, without_schema: bool = False) -> Path:
    """Copy both charts side by side into workdir and build the example's charts/.

    without_schema drops the library's values.schema.json first, which renders as
    `--skip-schema-validation` would. Returns the example chart's directory.
    """
    ignore = shutil.ignore_patterns("charts", "Chart.lock")
    shutil.copytree(LIBRARY, workdir / LIBRARY.name, ignore=ignore)
    if without_schema:
        (workdir / LIBRARY.name / "values.schema.json").unlink()
    example = workdir / EXAMPLE.name
    shutil.copytree(EXAMPLE, example, ignore=ignore)
    # Resolves file://../hub-follower into charts/hub-follower-0.1.0.tgz and writes
    # Chart.lock; a file:// repository needs no network.
    helm.dependency_update(example)
    return example


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def hf(**overrides: Any) -> dict[str, Any]:
    """Values that override `hubFollower.*` of the example chart."""
    return {"hubFollower": overrides}


def mode_values(mode: str, native: bool, wrapper: bool, **extra: Any) -> dict[str, Any]:
    return hf(restart={"mode": mode}, nativeSidecar=native, execWrapper=wrapper, **extra)


@dataclass
class Rendered:
    """The example chart's rendered manifests, parsed."""

    files: dict[str, str]
    docs: list[dict[str, Any]] = field(init=False)

    def __post_init__(self) -> None:
        self.docs = []
        for name, text in self.files.items():
            if name.endswith("NOTES.txt"):
                continue
            self.docs.extend(d for d in yaml.safe_load_all(text) if d)

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.docs if d["kind"] == kind]

    @property
    def notes(self) -> str:
        return next((t for n, t in self.files.items() if n.endswith("NOTES.txt")), "")

    @property
    def deployment(self) -> dict[str, Any]:
        (deployment,) = self.kind("Deployment")
        return deployment

    @property
    def pod(self) -> dict[str, Any]:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def annotations(self) -> dict[str, str]:
        return self.deployment["spec"]["template"]["metadata"].get("annotations") or {}

    @property
    def init_containers(self) -> list[dict[str, Any]]:
        return self.pod.get("initContainers") or []

    @property
    def containers(self) -> list[dict[str, Any]]:
        return self.pod["containers"]

    def container(self, name: str) -> dict[str, Any] | None:
        for c in self.init_containers + self.containers:
            if c["name"] == name:
                return c
        return None

    @property
    def worker(self) -> dict[str, Any]:
        worker = self.container("manager")
        assert worker is not None, "the worker container `manager` is missing"
        return worker

    @property
    def sidecar(self) -> dict[str, Any]:
        sidecar = self.container("hub-follower")
        assert sidecar is not None, "the hub-follower sidecar is missing"
        return sidecar

    @property
    def installer(self) -> dict[str, Any] | None:
        return self.container("hub-follower-install")

    @property
    def volumes(self) -> dict[str, dict[str, Any]]:
        return {v["name"]: v for v in self.pod.get("volumes") or []}


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def mounts(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """volumeMounts by mountPath."""
    return {m["mountPath"]: m for m in container.get("volumeMounts") or []}


def render(chart: helm.Chart, values: dict[str, Any] | None = None) -> Rendered:
    return Rendered(chart.render(values, name=RELEASE, namespace=NAMESPACE))


def render_error(chart: helm.Chart, values: dict[str, Any]) -> str:
    """Render, expecting Helm to refuse; returns its message."""
    try:
        chart.render(values, name=RELEASE, namespace=NAMESPACE)
    except helm.HelmError as exc:
        return str(exc)
    raise AssertionError(f"rendering with {values!r} succeeded; it should have failed")


def validate_k8s(doc: dict[str, Any], version: str = CURRENT_K8S) -> None:
    """Validate one manifest against the Kubernetes OpenAPI schema (strict: unknown
    fields fail too)."""
    kubernetes_validate.validate(doc, version, strict=True)
