"""The hub-follower binary under test, run as a process against real hubs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kube import REPO, Hub, Proc, free_port, wait_for, write_atomically


def binary() -> Path:
    """The release binary that scripts/test builds for the image, else a debug build."""
    named = os.environ.get("HUB_FOLLOWER_RELEASE_BINARY")
    if named:
        return (REPO / named) if not Path(named).is_absolute() else Path(named)
    return REPO / "target" / "debug" / "hub-follower"


@dataclass
class Follower:
    root: Path
    primary: Hub
    secondary: Hub
    primary_token: str
    secondary_token: str
    settings: dict[str, str] = field(default_factory=dict)
    port: int = field(default_factory=free_port)
    proc: Proc | None = None
    # In-cluster credentials for Events: a folder with token, ca.crt and namespace, mounted
    # where a pod has them, and the API server as KUBERNETES_SERVICE_HOST/PORT.
    incluster: Path | None = None
    service: tuple[str, int] | None = None

    def __post_init__(self) -> None:
        for side, hub, token in (("primary", self.primary, self.primary_token), ("secondary", self.secondary, self.secondary_token)):
            d = self.root / side
            d.mkdir(parents=True, exist_ok=True)
            write_atomically(d / "token", token)
            (d / "ca.crt").write_bytes(hub.cp.pki.ca_crt.read_bytes())

    @property
    def handoff_dir(self) -> Path:
        return self.root / "handoff"

    def token_file(self, side: str) -> Path:
        return self.root / side / "token"

    def env(self) -> dict[str, str]:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HUB_HOST_ENDPOINT": self.primary.cp.endpoint,
            "HUB_TOKEN_FILE": str(self.token_file("primary")),
            "HUB_CA_FILE": str(self.root / "primary" / "ca.crt"),
            "HUB_SECONDARY_HOST_ENDPOINT": self.secondary.cp.endpoint,
            "HUB_SECONDARY_TOKEN_FILE": str(self.token_file("secondary")),
            "HUB_SECONDARY_CA_FILE": str(self.root / "secondary" / "ca.crt"),
            "CLUSTER_NAME": self.primary.cluster,
            "HUB_PROJECT_NAMESPACE": self.primary.namespace,
            "HUB_HANDOFF_DIR": str(self.handoff_dir),
            "HUB_FOLLOWER_LISTEN": f"127.0.0.1:{self.port}",
            "HUB_RESTART_MODE": "none",
            "HUB_FOLLOWER_LOG_FORMAT": "json",
        }
        env.update(self.settings)
        return env

    def start(self) -> "Follower":
        argv = [str(binary())]
        env = self.env()
        if self.service is not None:
            env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"] = self.service[0], str(self.service[1])
        if self.incluster is not None:
            # A mount namespace of its own, with a tmpfs on /run (/var/run) holding the
            # service account files where kube's in-cluster config reads them. Needs root.
            script = ('mount -t tmpfs tmpfs /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount'
                      ' && cp "$1"/* /run/secrets/kubernetes.io/serviceaccount/ && exec "$2"')
            argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(self.incluster), str(binary())]
        self.proc = Proc("hub-follower", argv, self.root / "hub-follower.log", env=env).start()
        wait_for("hub-follower's /healthz", lambda: self._get("/healthz")[0] == 200, 20)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop()

    def _get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def status(self) -> dict[str, Any]:
        return json.loads(self._get("/status")[1])

    def metrics(self) -> dict[str, float]:
        """`name{labels}` -> value, labels as the exposition writes them."""
        out = {}
        for line in self._get("/metrics")[1].splitlines():
            m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def metric(self, name: str, lazy: bool = False, **labels: str) -> float:
        """The sum of a metric's series that carry these labels. No such series is a failure,
        not a zero: a renamed metric must not pass a `== 0` check. `lazy` is for the two
        watch counters whose series appear with their first occurrence (docs/metrics.md):
        for them, none yet is 0."""
        total, found = 0.0, False
        for key, value in self.metrics().items():
            base, _, rest = key.partition("{")
            if base != name:
                continue
            series = dict(re.findall(r'(\w+)="([^"]*)"', rest))
            if all(series.get(k) == v for k, v in labels.items()):
                total += value
                found = True
        if not found and not lazy:
            raise AssertionError(f"no series {name}{labels or ''} in /metrics")
        return total

    def handoff(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.handoff_dir / "active-hub.json").read_text())
        except (OSError, ValueError):
            return None

    def published(self, hub: str, reason: str | None = None) -> dict[str, Any] | None:
        h = self.handoff()
        if h and h["hub"] == hub and (reason is None or h["reason"] == reason):
            return h
        return None

    def log(self) -> str:
        return self.proc.tail(80) if self.proc else ""


def check(binary_path: Path, env: dict[str, str]) -> dict[str, Any]:
    r = subprocess.run([str(binary_path), "check", "--output", "json"], env=env, capture_output=True, text=True, timeout=30)
    return json.loads(r.stdout)
