"""The container image, checked without a Docker engine: the Dockerfile through the real
parser, and the release binary (built by scripts/test with the image's profile) through ldd
and its own /metrics."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import dockerfile
import pytest

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / os.environ.get("HUB_FOLLOWER_RELEASE_BINARY", "target/release/hub-follower")


@pytest.fixture(scope="module")
def commands():
    return dockerfile.parse_file(str(ROOT / "Dockerfile"))


def stages(commands):
    out = []
    for c in commands:
        if c.cmd == "FROM":
            out.append([c])
        elif out:
            out[-1].append(c)
    return out


def test_the_build_is_multi_stage(commands):
    froms = [c for c in commands if c.cmd == "FROM"]
    assert len(froms) >= 2
    assert [v.upper() for v in froms[0].value[1:]] == ["AS", "BUILDER"]


def test_every_base_image_is_pinned(commands):
    for c in (c for c in commands if c.cmd == "FROM"):
        image = c.value[0]
        if "@sha256:" in image:
            continue
        name, _, tag = image.rpartition(":")
        assert name and "/" not in tag, f"{image} has no tag"
        assert tag != "latest", f"{image} floats"
    builder = stages(commands)[0][0].value[0]
    assert re.search(r":\d+\.\d+\.\d+", builder), f"the Rust toolchain is not pinned to a version: {builder}"


def test_the_build_is_locked_with_the_release_profile(commands):
    runs = " ".join(" ".join(c.value) for c in stages(commands)[0] if c.cmd == "RUN")
    assert "cargo build --release --locked" in runs
    profile = tomllib.loads((ROOT / "Cargo.toml").read_text())["profile"]["release"]
    assert profile["lto"] in (True, "fat", "thin")
    assert profile["codegen-units"] == 1
    assert profile["strip"] in (True, "symbols")
    assert profile["panic"] == "abort"


def test_the_runtime_stage_holds_only_the_binary_and_runs_as_a_numeric_non_root_user(commands):
    final = stages(commands)[-1]
    assert final[0].value[0].startswith("gcr.io/distroless/")
    copies = [c for c in final if c.cmd in ("COPY", "ADD")]
    assert len(copies) == 1 and copies[0].cmd == "COPY"
    assert copies[0].flags == ("--from=builder",) and copies[0].value == ("/hub-follower", "/hub-follower")
    users = [c.value[0] for c in final if c.cmd == "USER"]
    assert users, "no USER in the runtime stage"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0, users[-1]
    assert gid == "" or (gid.isdigit() and int(gid) != 0)
    assert not any(c.cmd == "RUN" for c in final), "the runtime stage has no shell to RUN with"


def test_the_entrypoint_is_the_binary_in_exec_form(commands):
    entry = [c for c in stages(commands)[-1] if c.cmd == "ENTRYPOINT"]
    assert len(entry) == 1 and entry[0].json and entry[0].value == ("/hub-follower",)


def test_the_image_carries_oci_labels(commands):
    labels = " ".join(" ".join(c.value) for c in commands if c.cmd == "LABEL")
    for key in ("org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.licenses"):
        assert key in labels


def test_the_build_context_leaves_out_target_and_git():
    ignored = {l.strip() for l in (ROOT / ".dockerignore").read_text().splitlines() if l.strip() and not l.startswith("#")}
    assert {"target", ".git"} <= ignored
    for needed in ("src", "Cargo.toml", "Cargo.lock", "benches"):
        assert needed not in ignored


def test_the_build_is_static_on_a_base_without_libc(commands):
    env = " ".join(" ".join(c.value) for c in stages(commands)[0] if c.cmd == "ENV")
    assert "+crt-static" in env
    assert stages(commands)[-1][0].value[0].startswith("gcr.io/distroless/static")


def test_the_release_binary_needs_no_shared_library():
    assert BINARY.exists(), f"{BINARY} missing: scripts/test builds it as the Dockerfile does"
    out = subprocess.run(["ldd", str(BINARY)], capture_output=True, text=True)
    assert "statically linked" in out.stdout + out.stderr or "not a dynamic executable" in out.stdout + out.stderr, out


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for chroot")
def test_the_exec_wrapper_runs_in_a_root_with_nothing_else(tmp_path):
    """What `install` + `exec` do in a worker image that has no libc: only the binary and the
    shared handoff volume exist in the root."""
    root = tmp_path / "root"
    (root / "handoff" / "..1_1").mkdir(parents=True)
    (root / "bin").mkdir()
    decision = {"hub": "secondary", "endpoint": "https://10.1.80.12:6443", "tokenFile": "/t/token",
                "caFile": "/t/ca.crt", "identity": None, "generation": 4,
                "decidedAt": "2026-12-02T10:00:00Z", "reason": "switch"}
    import json
    (root / "handoff" / "..1_1" / "active-hub.json").write_text(json.dumps(decision))
    (root / "handoff" / "..data").symlink_to("..1_1")
    (root / "handoff" / "active-hub.json").symlink_to("..data/active-hub.json")
    subprocess.run([str(BINARY), "install", str(root / "bin" / "hub-follower")], check=True)
    # The "worker" is the binary itself printing its version: there is nothing else to run.
    out = subprocess.run(["chroot", str(root), "/bin/hub-follower", "exec", "--handoff-dir=/handoff",
                          "--", "/bin/hub-follower", "--version"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("hub-follower ")
    assert "starting on hub secondary" in out.stderr
    assert json.loads((root / "handoff" / "worker-ack.json").read_text())["generation"] == 4


def test_the_release_binary_is_stripped_and_small():
    size = BINARY.stat().st_size
    assert size < 15 * 1024 * 1024, f"{size} bytes"
    symbols = subprocess.run(["nm", str(BINARY)], capture_output=True, text=True)
    assert "no symbols" in symbols.stderr or symbols.stdout.strip() == ""


HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def chart_metric_names(workdir: Path) -> dict[str, set[str]]:
    """The metric names the chart's PrometheusRule alerts and Grafana dashboard query, as
    rendered by real Helm (tests/chart/chartkit.py): every alert (the watch on, two hubs)
    and the dashboard's ConfigMap."""
    sys.path.insert(0, str(ROOT / "tests" / "chart"))
    import chartkit
    import helm_python as helm

    values = chartkit.hf(metrics={"prometheusRule": {"enabled": True}}, dashboard={"enabled": True}, watch={"enabled": True})
    with helm.Chart.load(chartkit.prepare_charts(workdir)) as chart:
        rendered = chartkit.render(chart, values)
    alerts = chartkit.rule_exprs(rendered)
    assert "HubFollowerWatchDown" in alerts, alerts
    (cm,) = [d for d in rendered.kind("ConfigMap") if d["metadata"]["name"].endswith("-hub-follower-dashboard")]
    dashboard = json.loads(cm["data"]["hub-follower.json"])
    used = {"alerts": set(), "dashboard": set()}
    for expr in alerts.values():
        used["alerts"] |= chartkit.metric_names(expr)
    for expr in chartkit.dashboard_exprs(dashboard):
        used["dashboard"] |= chartkit.metric_names(expr)
    assert used["alerts"] and used["dashboard"], used
    return used


def exposition_names(text: str) -> tuple[set[str], set[str]]:
    """(sample names, names declared histogram) in a Prometheus text exposition."""
    samples, histograms = set(), set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(maxsplit=3)
            if kind.strip() == "histogram":
                histograms.add(name)
        elif line.strip() and not line.startswith("#"):
            samples.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    return samples, histograms


def exported(name: str, samples: set[str], histograms: set[str]) -> bool:
    if name in samples:
        return True
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in histograms:
            return True
    return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(process: subprocess.Popen, url: str, log: Path, within: float) -> str:
    deadline = time.monotonic() + within
    last = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"hub-follower exited with {process.returncode} before serving /metrics:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return response.read().decode()
                last = f"HTTP {response.status}"
        except (urllib.error.URLError, OSError) as e:
            last = e
        time.sleep(0.1)
    pytest.fail(f"no /metrics at {url} within {within}s (last: {last}):\n{log.read_text()}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM to that process by its PID, SIGKILL if it has not exited 5 s later."""
    if process.poll() is not None:
        return
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


@pytest.mark.skipif(
    "HUB_FOLLOWER_RELEASE_BINARY" not in os.environ,
    reason="HUB_FOLLOWER_RELEASE_BINARY is unset: scripts/test builds the release binary and sets it",
)
def test_the_binary_exports_every_metric_the_chart_queries(tmp_path):
    """The alerts and the dashboard name only metrics the release binary serves on
    /metrics: a renamed or missing metric would leave an alert that never fires or an
    empty panel."""
    assert BINARY.exists(), f"{BINARY} missing: scripts/test builds it as the Dockerfile does"
    used = chart_metric_names(tmp_path / "charts")

    # Two hubs nobody listens on: the binary starts, serves /metrics and keeps probing.
    token, ca, handoff = tmp_path / "token", tmp_path / "ca.crt", tmp_path / "handoff"
    token.write_text("not-a-real-token\n")
    ca.write_text("not a certificate\n")
    handoff.mkdir()
    port = free_port()
    args = [
        str(BINARY),
        "--hub-endpoint=https://127.0.0.1:1",
        "--secondary-endpoint=https://127.0.0.1:2",
        "--cluster-name=worker-1",
        "--namespace=kubeslice-acme",
        f"--handoff-dir={handoff}",
        f"--listen=127.0.0.1:{port}",
        "--events=false",
        "--poll-interval=10s",
        f"--hub-token-file={token}",
        f"--hub-ca-file={ca}",
        f"--secondary-token-file={token}",
        f"--secondary-ca-file={ca}",
    ]
    log = tmp_path / "hub-follower.log"
    # Only PATH from the environment: no HUB_* variable of the caller's reaches the binary.
    with log.open("wb") as out:
        process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                   env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    try:
        text = scrape(process, f"http://127.0.0.1:{port}/metrics", log, within=10)
    finally:
        stop(process)
    samples, histograms = exposition_names(text)
    assert samples, text
    for source, names in used.items():
        missing = sorted(n for n in names if not exported(n, samples, histograms))
        assert not missing, f"the {source} use metrics the binary does not export: {missing}\nexported: {sorted(samples)}"
