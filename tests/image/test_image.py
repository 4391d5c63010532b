"""The container image, checked without a Docker engine: the Dockerfile through the real
parser, and the release binary (built by scripts/test with the image's profile) through ldd."""

import os
import re
import subprocess
import tomllib
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
