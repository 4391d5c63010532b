"""Fleet benchmark (GitHub issue #20): what N hub-followers cost two real kube-apiservers, and
how fast the fleet follows a promotion.

Run it through `tests/k8s/fleet` (root, a network namespace of its own). Two hubs (etcd and
kube-apiserver each, their own CA and service-account key) are started once; for each fleet
size N and watch on/off, N follower processes (the release binary) are started, the hubs'
request rate, request latency and CPU are measured over a window, then every Cluster on hub B
is made to claim B and the time until each follower publishes the switch is recorded.

All followers of a hub share one reader ServiceAccount token: on a real fleet each worker has
its own, so the API server's priority and fairness sees one flow here where it would see N.

With `--hub-side real`, the hubs behave as KubeSlice's own HA controller and the workers make
them behave (`fleet_hub_side.py`): the Active rewrites every 30 s each claim the worker erased,
the Standby mirrors both, and the promotion is B's publisher writing one Cluster at a time.
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import re
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from fleet_hub_side import RealHubSide
from kube import REPO, ControlPlane, Hub, Pki, Proc, now_rfc3339

WORK = REPO / "target" / "bench" / "fleet-run"
DEFAULT_BINARY = "target/x86_64-unknown-linux-gnu/release/hub-follower"
GROUP_VERSION = "controller.kubeslice.io/v1alpha1"
# Follower i listens on PORT_BASE + i: below the ephemeral range, so no outgoing connection
# (of which a fleet makes thousands) can take a follower's port.
PORT_BASE = 10000
CLK_TCK = os.sysconf("SC_CLK_TCK")
VERBS = ("GET", "LIST", "WATCH")
STARTUP_TIMEOUT = 60.0  # seconds for a follower to publish its first decision
AFTER_PROMOTION = 60.0  # seconds from the promotion's first patch over which the hubs' requests are counted
IDENTITY = {"primary": "ctrl-a", "secondary": "ctrl-b"}


# ---------------------------------------------------------------------------------------------
# Talking to a hub as its admin


class Admin:
    """HTTPS requests to one kube-apiserver with its admin certificate (system:masters), one
    kept-alive connection per thread, so a thread pool can create and patch objects fast."""

    def __init__(self, cp: ControlPlane):
        self.port = cp.port
        self.context = ssl.create_default_context(cafile=str(cp.pki.ca_crt))
        self.context.load_cert_chain(str(cp.admin[0]), str(cp.admin[1]))
        self.local = threading.local()

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> tuple[int, bytes]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type, "Accept": "application/json"} if data is not None else {}
        for attempt in (1, 2):  # a kept-alive connection the server closed is retried once, fresh
            conn = getattr(self.local, "conn", None)
            if conn is None:
                conn = self.local.conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context, timeout=60)
            try:
                conn.request(method, path, body=data, headers=headers)
                response = conn.getresponse()
                return response.status, response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def expect(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
               ok: tuple[int, ...] = (200, 201)) -> bytes:
        status, data = self.request(method, path, body, content_type)
        if status not in ok:
            raise RuntimeError(f"{method} {path} on 127.0.0.1:{self.port}: HTTP {status}: {data[:300]!r}")
        return data


def clusters_path(namespace: str, name: str = "", subresource: str = "") -> str:
    path = f"/apis/{GROUP_VERSION}/namespaces/{namespace}/clusters"
    return path + (f"/{name}" if name else "") + (f"/{subresource}" if subresource else "")


@dataclass
class HubSide:
    """One hub of the pair: its control plane, its Hub (CRDs, namespace, reader), an admin client."""

    role: str  # "primary" or "secondary"
    hub: Hub
    admin: Admin

    @property
    def cp(self) -> ControlPlane:
        return self.hub.cp

    def create_clusters(self, names: list[str], pool: ThreadPoolExecutor) -> None:
        ns = self.hub.namespace

        def create(name: str) -> None:
            self.admin.expect("POST", clusters_path(ns), {
                "apiVersion": GROUP_VERSION, "kind": "Cluster", "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterProperty": {"monitoring": {"kubernetesDashboard": {"enabled": True}}}},
            }, ok=(201, 409))  # 409: Hub.install made worker-1 already

        list(pool.map(create, names))

    def claim(self, names: list[str], endpoint: str, identity: str,
              pool: ThreadPoolExecutor, rate: float | None = None) -> dict[str, tuple[float, float]]:
        """Publishes status.activeController (a fresh lastUpdated) on each named Cluster through the
        status subresource, concurrently, as fast as the hub takes them or, with `rate`, sent at
        most that many a second; returns, per Cluster, when its patch was sent and when its answer
        came (Unix time). The write was committed somewhere in between."""
        ns = self.hub.namespace
        begin = time.monotonic()
        slot = {name: i / rate for i, name in enumerate(names)} if rate else {}

        def patch(name: str) -> tuple[str, tuple[float, float]]:
            if name in slot:
                time.sleep(max(0.0, begin + slot[name] - time.monotonic()))
            claim = {"endpoint": endpoint, "identity": identity, "lastUpdated": now_rfc3339()}
            sent = time.time()
            self.admin.expect("PATCH", clusters_path(ns, name, "status"), {"status": {"activeController": claim}},
                              content_type="application/merge-patch+json")
            return name, (sent, time.time())

        return dict(pool.map(patch, names))

    def reader_token(self, seconds: int) -> str:
        """A token of the reader ServiceAccount (get/list/watch on every Cluster of the namespace)."""
        path = f"/api/v1/namespaces/{self.hub.namespace}/serviceaccounts/{self.hub.reader}/token"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": seconds}}
        return json.loads(self.admin.expect("POST", path, body))["status"]["token"]

    def patch_status(self, name: str, body: dict[str, Any]) -> None:
        """One merge patch of a Cluster's status: the real hub side's writes."""
        self.admin.expect("PATCH", clusters_path(self.hub.namespace, name, "status"), body,
                          content_type="application/merge-patch+json")

    def scrape(self) -> "Scrape":
        data = self.admin.expect("GET", "/metrics").decode()
        return Scrape.parse(time.time(), data)


# ---------------------------------------------------------------------------------------------
# The API server's metrics


LINE = re.compile(r"^(\w+)\{(.*)\} (\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass
class Scrape:
    """What is kept of one scrape of a kube-apiserver's /metrics, for resource="clusters"."""

    at: float
    requests: dict[tuple[str, str], float] = field(default_factory=dict)  # (verb, code) -> count
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)  # verb -> le -> cumulative count
    duration_sum: dict[str, float] = field(default_factory=dict)  # verb -> seconds
    held_watches: float = 0.0  # apiserver_longrunning_requests, WATCH on clusters, at this instant

    @classmethod
    def parse(cls, at: float, text: str) -> "Scrape":
        s = cls(at)
        for line in text.splitlines():
            if not line.startswith(("apiserver_request_total{", "apiserver_request_duration_seconds_",
                                    "apiserver_longrunning_requests{")):
                continue
            m = LINE.match(line)
            if not m:
                continue
            name, labels, value = m.group(1), dict(LABEL.findall(m.group(2))), float(m.group(3))
            if labels.get("resource") != "clusters" or labels.get("group") != "controller.kubeslice.io":
                continue
            verb = labels.get("verb", "")
            if name == "apiserver_request_total":
                key = (verb, labels.get("code", ""))
                s.requests[key] = s.requests.get(key, 0.0) + value
            elif name == "apiserver_longrunning_requests" and verb == "WATCH":
                s.held_watches += value
            elif verb in ("GET", "LIST") and labels.get("subresource", "") == "":
                if name == "apiserver_request_duration_seconds_bucket":
                    le = float(labels["le"])
                    per_verb = s.buckets.setdefault(verb, {})
                    per_verb[le] = per_verb.get(le, 0.0) + value
                elif name == "apiserver_request_duration_seconds_sum":
                    s.duration_sum[verb] = s.duration_sum.get(verb, 0.0) + value
        return s


def histogram_quantile(q: float, buckets: dict[float, float]) -> float | None:
    """The q-quantile of cumulative bucket counts (upper bound -> count), interpolated linearly
    within its bucket as Prometheus's histogram_quantile does; None without observations."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != math.inf or buckets[math.inf] <= 0:
        return None
    rank = q * buckets[math.inf]
    lower, below = 0.0, 0.0
    for upper in bounds:
        count = buckets[upper]
        if count >= rank:
            if upper == math.inf:
                return lower  # in the +Inf bucket: the highest finite bound, as Prometheus answers
            if upper == bounds[0] and upper <= 0:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return None


def hub_window(before: Scrape, after: Scrape, workers: int, driver: dict[str, int] | None = None) -> dict[str, Any]:
    """Request rates and GET/LIST latency of one hub between two scrapes. `driver`: the
    requests this benchmark itself made meanwhile, by verb (the real hub side's writes,
    lists and watches), left out of the followers' share."""
    seconds = after.at - before.at
    delta = {key: after.requests.get(key, 0.0) - before.requests.get(key, 0.0) for key in after.requests}
    by_verb: dict[str, float] = {}
    for (verb, _code), n in delta.items():
        by_verb[verb] = by_verb.get(verb, 0.0) + n
    total = sum(by_verb.values())
    driver = driver or {}
    followers_by_verb = {verb: max(0.0, by_verb.get(verb, 0.0) - driver.get(verb, 0)) for verb in VERBS}
    followers = sum(followers_by_verb.values())
    latency: dict[str, Any] = {}
    for verb in ("GET", "LIST"):
        b0, b1 = before.buckets.get(verb, {}), after.buckets.get(verb, {})
        buckets = {le: b1[le] - b0.get(le, 0.0) for le in b1}
        count = buckets.get(math.inf, 0.0)
        p99 = histogram_quantile(0.99, buckets)
        p50 = histogram_quantile(0.50, buckets)
        mean = (after.duration_sum.get(verb, 0.0) - before.duration_sum.get(verb, 0.0)) / count if count else None
        latency[verb] = {"count": count, "p50_ms": ms(p50), "p99_ms": ms(p99), "mean_ms": ms(mean)}
    return {
        "seconds": seconds,
        "requests": total,
        "requests_per_s": total / seconds,
        "requests_per_s_per_worker": total / seconds / workers,
        "requests_by_verb": by_verb,
        "requests_per_s_by_verb": {verb: by_verb.get(verb, 0.0) / seconds for verb in VERBS},
        "driver_requests": driver,
        "followers_requests_per_s_per_worker": followers / seconds / workers,
        "followers_requests_per_s_per_worker_by_verb": {verb: n / seconds / workers for verb, n in followers_by_verb.items()},
        "non_2xx": {f"{verb} {code}": n for (verb, code), n in delta.items() if n and not code.startswith("2")},
        "latency": latency,
        "held_watches_at_end": after.held_watches,
    }


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# ---------------------------------------------------------------------------------------------
# /proc


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent not idle (all cores), from /proc/stat."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return (sum(values[:8]) - idle) / CLK_TCK


def process(proc: Proc | None) -> Proc:
    assert proc is not None, "a hub's process is not running"
    return proc


def mem_available() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------------------------------------
# The fleet


@dataclass
class Member:
    """One follower: its own handoff directory, listen port and log file."""

    index: int
    root: Path
    proc: Proc | None = None
    started: float = 0.0  # time.monotonic() at its start

    @property
    def name(self) -> str:
        return f"worker-{self.index}"

    @property
    def port(self) -> int:
        return PORT_BASE + self.index

    @property
    def handoff_dir(self) -> Path:
        return self.root / self.name / "handoff"

    @property
    def log(self) -> Path:
        return self.root / f"{self.name}.log"

    def handoff(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.handoff_dir / "active-hub.json").read_text())
        except (OSError, ValueError):
            return None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def status(self) -> Any:
        """The follower's /status (its pending switch, its hubs' verdicts), or why there is none."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/status", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError) as e:
            return f"no /status: {e}"

    def tail(self, lines: int = 20) -> str:
        return self.proc.tail(lines) if self.proc else ""


@dataclass
class Credentials:
    """The reader token and CA of each hub, written once; every follower reads the same files."""

    root: Path

    def token(self, role: str) -> Path:
        return self.root / role / "token"

    def ca(self, role: str) -> Path:
        return self.root / role / "ca.crt"

    def write(self, side: HubSide, token: str) -> None:
        (self.root / side.role).mkdir(parents=True, exist_ok=True)
        self.token(side.role).write_text(token)
        self.ca(side.role).write_bytes(side.cp.pki.ca_crt.read_bytes())


def follower_env(m: Member, a: HubSide, b: HubSide, creds: Credentials, watch: bool, extra: dict[str, str]) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HUB_HOST_ENDPOINT": a.cp.endpoint,
        "HUB_TOKEN_FILE": str(creds.token("primary")),
        "HUB_CA_FILE": str(creds.ca("primary")),
        "HUB_SECONDARY_HOST_ENDPOINT": b.cp.endpoint,
        "HUB_SECONDARY_TOKEN_FILE": str(creds.token("secondary")),
        "HUB_SECONDARY_CA_FILE": str(creds.ca("secondary")),
        "CLUSTER_NAME": m.name,
        "HUB_PROJECT_NAMESPACE": a.hub.namespace,
        "HUB_HANDOFF_DIR": str(m.handoff_dir),
        "HUB_FOLLOWER_LISTEN": f"127.0.0.1:{m.port}",
        "HUB_RESTART_MODE": "none",
        "HUB_FOLLOWER_LOG_FORMAT": "json",
        "RUST_LOG": "warn",
        **extra,
        "HUB_WATCH": "true" if watch else "false",
    }
    return env


def wait_published(members: list[Member], hub: str, timeout: float, every: float = 0.2) -> None:
    """Waits until each member's handoff names `hub`. Raises naming the followers that did not
    (or died), with their log tails."""
    pending = {m.name: m for m in members}
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        for name, m in list(pending.items()):
            h = m.handoff()
            if h and h.get("hub") == hub:
                del pending[name]
            elif not m.alive():
                raise RuntimeError(f"{name} exited before publishing the {hub}:\n{m.tail()}")
        if pending:
            time.sleep(every)
    if pending:
        raise RuntimeError(f"{len(pending)} follower(s) did not publish the {hub} within {timeout}s: "
                           + describe([pending[n] for n in sorted(pending)]))


def describe(members: list[Member], limit: int = 5) -> str:
    out = []
    for m in members[:limit]:
        out.append(f"\n--- {m.name} (alive: {m.alive()}), handoff {m.handoff()}, log tail:\n{m.tail()}")
    if len(members) > limit:
        out.append(f"\n... and {len(members) - limit} more: {' '.join(m.name for m in members[limit:])}")
    return "".join(out)


def stop_fleet(members: list[Member], grace: float = 10.0) -> None:
    """SIGTERM to every follower at once, SIGKILL to those still alive after the grace."""
    running = [m.proc.popen for m in members if m.alive() and m.proc and m.proc.popen]
    for p in running:
        p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in running:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)


def percentile(values: list[float], q: float) -> float | None:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def parse_rfc3339(text: str) -> float:
    """Unix time of an RFC 3339 timestamp, nanoseconds kept (decidedAt has them)."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)", text)
    if not m:
        raise ValueError(f"not RFC 3339: {text!r}")
    offset = "+00:00" if m.group(3) == "Z" else m.group(3)
    return datetime.fromisoformat(m.group(1) + offset).timestamp() + float(m.group(2) or 0)


NEWS = "the claim changed; reading all hubs now"  # the watch's debug line (RUST_LOG=hub_follower::claim_watch=debug)


def news_at(log: Path, since: float) -> float | None:
    """When the follower's watch first raised news at or after `since` (Unix time), from its
    log, if it logs at debug."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in lines:
        if NEWS in line:
            at = parse_rfc3339(json.loads(line)["timestamp"])
            if at >= since:
                return at
    return None


def per_follower(t0: float, patched: dict[str, tuple[float, float]], decided: dict[str, float],
                 logs: dict[str, Path]) -> dict[str, Any]:
    """Each follower's patch sent and answered, its watch's news (with RUST_LOG at debug for
    hub_follower::claim_watch) and its decidedAt, in seconds from the first patch sent; and
    where its latency went: the patch's answer to the watch's news, and the news to the
    decision (the confirmation span, then one read of each hub)."""
    columns = ["name", "sent", "answered", "news", "decided"]
    rows = []
    for name in sorted(decided, key=lambda n: patched[n][0]):
        sent, answered = patched[name]
        news = news_at(logs[name], sent)
        rows.append([name] + [None if t is None else round(t - t0, 4) for t in (sent, answered, news, decided[name])])
    stages: dict[str, Any] = {}
    with_news = [r for r in rows if r[3] is not None]
    if with_news and len(with_news) == len(rows):
        for key, values in (("answered_to_news", [r[3] - r[2] for r in rows]), ("news_to_decided", [r[4] - r[3] for r in rows])):
            stages[key] = {"p50": percentile(values, 0.5), "p99": percentile(values, 0.99), "max": max(values), "min": min(values)}
    return {"stages_s": stages or None, "samples": {"t0": t0, "columns": columns, "rows": rows}}


# ---------------------------------------------------------------------------------------------
# One configuration: N followers, watch on or off


@dataclass
class Bench:
    args: argparse.Namespace
    builds: dict[str, Path]  # "this", and "baseline" with --baseline
    a: HubSide
    b: HubSide
    creds: Credentials
    pool: ThreadPoolExecutor
    hub_side: RealHubSide | None = None  # with --hub-side real
    rss_per_follower: float | None = None  # the largest seen so far, to check a bigger fleet fits

    def driver_requests(self) -> dict[str, dict[str, int]]:
        """What this benchmark has sent each hub so far, by verb (only the real hub side sends
        anything while the followers are measured)."""
        if self.hub_side is None:
            return {}
        by_role = self.hub_side.requests()
        return {side.cp.name: by_role[side.role] for side in (self.a, self.b)}

    def run(self, n: int, watch: bool, build: str = "this") -> dict[str, Any]:
        binary = self.builds[build]
        label = f"N={n} watch={'on' if watch else 'off'} build={build}"
        window, warmup, spread = timing(self.args, watch)
        self.check_fits(n)
        # Each build its own handoff directories: a follower that found the last run's
        # decision would resume it, and a switch back within --split-brain-window holds the
        # promotion (rule 11).
        root = WORK / f"n{n}-watch-{'on' if watch else 'off'}-{build}"
        members = [Member(i, root) for i in range(n)]
        names = [m.name for m in members]
        result: dict[str, Any] = {"n": n, "watch": watch, "build": build, "binary": str(binary), "window_s": window, "warmup_s": warmup, "spread_s": spread,
                                  "logs": str(root.relative_to(REPO)), "failures": []}
        try:
            log(f"{label}: starting {n} followers over {spread:.0f} s, at most {self.args.max_starting} at once")
            started = time.time()
            last_start = self.start_fleet(members, watch, spread, binary)
            result["startup_s"] = time.time() - started
            log(f"{label}: all {n} published the primary in {result['startup_s']:.1f} s; warming up {warmup:.0f} s")
            time.sleep(max(0.0, last_start + warmup - time.time()))

            log(f"{label}: measuring for {window:.0f} s")
            result.update(self.measure(members, window))
            self.rss_per_follower = max(self.rss_per_follower or 0.0, result["followers"]["rss_max_bytes"] or 0.0)
            dead = [m for m in members if not m.alive()]
            if dead:
                result["failures"].append({"what": "followers exited during the window",
                                           "followers": [{"name": m.name, "log_tail": m.tail()} for m in dead]})

            log(f"{label}: promotion: every Cluster on hub B now claims B")
            result["promotion"] = self.promote(members)
            stages = result["promotion"]["stages_s"]
            if stages:
                log(f"{label}: patch answered -> the watch's news, p50 / p99: {stages['answered_to_news']['p50']:.3f} / "
                    f"{stages['answered_to_news']['p99']:.3f} s; news -> decision: {stages['news_to_decided']['p50']:.3f} / "
                    f"{stages['news_to_decided']['p99']:.3f} s")
            if result["promotion"]["not_switched"]:
                result["failures"].append({"what": "followers that did not follow the promotion",
                                           "followers": result["promotion"]["not_switched"]})
        finally:
            stop_fleet(members)
            if self.hub_side is not None:
                # A failback: A's controller leads again, B mirrors it, every worker on A.
                self.hub_side.restore()
                self.hub_side.wait_pass(120)
                failures = self.hub_side.failures()
                if failures:
                    result["failures"].append({"what": "the hub side's requests that failed", "followers": failures})
            else:
                # Back to the start: hub B claims A again (hub A's claims never changed), so the
                # next fleet decides for the primary at startup.
                self.b.claim(names, self.a.cp.endpoint, IDENTITY["primary"], self.pool)
        return result

    def start_fleet(self, members: list[Member], watch: bool, spread: float, binary: Path) -> float:
        """Starts the followers evenly over --spread seconds, so that their rounds are spread over
        the poll interval as a real fleet's are (followers started together poll in lockstep), and
        never more than --max-starting at once that have not yet published their first decision
        (the TLS handshakes and first reads of a start). Returns when the last one started."""
        pace = spread / len(members)
        begin = time.monotonic()
        starting: list[Member] = []
        last_start = time.time()
        for i, m in enumerate(members):
            while len(starting) >= self.args.max_starting:
                starting = [s for s in starting if not self.published_primary(s)]
                time.sleep(0.02)
            time.sleep(max(0.0, begin + i * pace - time.monotonic()))
            env = follower_env(m, self.a, self.b, self.creds, watch, self.args.env)
            m.proc = Proc(m.name, [str(binary)], m.log, env=env).start()
            m.started = time.monotonic()
            last_start = time.time()
            starting.append(m)
        wait_published(starting, "primary", timeout=STARTUP_TIMEOUT)
        return last_start

    @staticmethod
    def published_primary(m: Member) -> bool:
        h = m.handoff()
        if h and h.get("hub") == "primary":
            return True
        if not m.alive():
            raise RuntimeError(f"{m.name} exited before publishing the primary:\n{m.tail()}")
        if time.monotonic() - m.started > STARTUP_TIMEOUT:
            raise RuntimeError(f"{m.name} did not publish the primary within {STARTUP_TIMEOUT} s:" + describe([m]))
        return False

    def check_fits(self, n: int) -> None:
        if self.rss_per_follower is None:
            return
        need, available = n * self.rss_per_follower, mem_available()
        log(f"N={n}: {n} followers need about {need / 2**30:.2f} GiB (largest RSS seen {self.rss_per_follower / 2**20:.2f} MiB); "
            f"{available / 2**30:.1f} GiB available")
        if need > 0.8 * available:
            raise RuntimeError(f"{n} followers would not fit in memory: {need / 2**30:.1f} GiB of {available / 2**30:.1f} GiB")

    def hub_pids(self) -> dict[str, dict[str, int]]:
        return {side.cp.name: {"apiserver": process(side.cp.apiserver).pid, "etcd": process(side.cp.etcd).pid}
                for side in (self.a, self.b)}

    def cpu_now(self, members: list[Member]) -> dict[str, Any]:
        """CPU seconds so far: the machine's, all followers' together, each hub's API server and
        etcd, and this driver's own."""
        followers = 0.0
        for m in members:
            try:
                followers += cpu_seconds(m.pid)
            except OSError:
                pass  # exited; reported after the window
        return {"at": time.monotonic(), "machine": machine_busy_seconds(), "followers": followers,
                "driver": cpu_seconds(os.getpid()),
                "hubs": {name: {what: cpu_seconds(pid) for what, pid in p.items()} for name, p in self.hub_pids().items()}}

    @staticmethod
    def cores_between(cpu0: dict[str, Any], cpu1: dict[str, Any]) -> dict[str, Any]:
        """Mean cores each part used between two cpu_now()s."""
        seconds = cpu1["at"] - cpu0["at"]
        return {"seconds": seconds,
                **{what: (cpu1[what] - cpu0[what]) / seconds for what in ("machine", "followers", "driver")},
                **{f"{name} {what}": (cpu1["hubs"][name][what] - cpu0["hubs"][name][what]) / seconds
                   for name in cpu1["hubs"] for what in cpu1["hubs"][name]}}

    def profile(self, side: HubSide, n: int) -> str:
        """A CPU profile of the side's API server over --profile seconds, from now; its path."""
        seconds = max(1, round(self.args.profile))
        data = side.admin.expect("GET", f"/debug/pprof/profile?seconds={seconds}")
        path = REPO / "target" / "bench" / f"fleet-{n}-{side.cp.name}.pprof"
        path.write_bytes(data)
        return str(path.relative_to(REPO))

    def measure(self, members: list[Member], window: float) -> dict[str, Any]:
        sides = (self.a, self.b)
        pids = self.hub_pids()

        def scrape() -> dict[str, Scrape]:  # both hubs at once, so that their windows match
            return dict(zip((side.cp.name for side in sides), self.pool.map(HubSide.scrape, sides)))

        scrapes0 = scrape()
        driver0 = self.driver_requests()
        cpu0 = self.cpu_now(members)
        time.sleep(window)
        cores = self.cores_between(cpu0, self.cpu_now(members))
        scrapes1 = scrape()
        driver1 = self.driver_requests()

        n = len(members)
        hubs = {}
        for side in sides:
            name = side.cp.name
            driver = {verb: k - driver0.get(name, {}).get(verb, 0) for verb, k in driver1.get(name, {}).items()}
            hub = hub_window(scrapes0[name], scrapes1[name], n, driver)
            hub["role"] = side.role
            for what in ("apiserver", "etcd"):
                hub[f"{what}_cpu_cores"] = cores[f"{name} {what}"]
                hub[f"{what}_rss_bytes"] = rss_bytes(pids[name][what])
            hubs[name] = hub
        rss = [rss_bytes(m.pid) for m in members if m.alive()]
        return {
            "measured_s": cores["seconds"],
            "machine_busy_cores": cores["machine"],
            "hubs": hubs,
            "followers": {
                "cpu_cores": cores["followers"],
                "cpu_ms_per_s_per_follower": cores["followers"] / n * 1000,
                "rss_mean_bytes": sum(rss) / len(rss) if rss else None,
                "rss_max_bytes": max(rss) if rss else None,
            },
        }

    def promote(self, members: list[Member]) -> dict[str, Any]:
        """Every Cluster on hub B claims B, fresh; hub A's claims stay as they were (an old Active
        that stopped publishing). Times each follower's switch from its own Cluster's patch."""
        names = [m.name for m in members]
        sides = (self.a, self.b)
        before = dict(zip((s.cp.name for s in sides), self.pool.map(HubSide.scrape, sides)))
        cpu0 = self.cpu_now(members)
        # Threads of their own: the 16 of the pool send the patches, as in a run without.
        profiler = ThreadPoolExecutor(max_workers=2) if self.args.profile else None
        profiles = [profiler.submit(self.profile, side, len(members)) for side in sides] if profiler else []
        first_sent = time.time()
        driver0 = self.driver_requests()
        if self.hub_side is not None:
            # A's controller dies; B's publishes at once, one Cluster at a time. Each
            # follower's time counts from its own Cluster's write.
            self.hub_side.promote()
            patched = {}
        else:
            patched = self.b.claim(names, self.b.cp.endpoint, IDENTITY["secondary"], self.pool, self.args.patch_rate)
        timeout = self.args.promotion_timeout
        pending = {m.name: m for m in members}
        decided: dict[str, float] = {}
        deadline = time.monotonic() + timeout
        # Each follower stamps its own decision (decidedAt), so how often this loop looks
        # changes no latency; it looks rarely, and reads a handoff only once it has changed,
        # so as not to take from the 2 cores the followers and hubs share.
        seen: dict[str, int] = {}
        while pending and time.monotonic() < deadline:
            for name, m in list(pending.items()):
                try:
                    stamp = (m.handoff_dir / "active-hub.json").stat().st_mtime_ns
                except OSError:
                    continue
                if seen.get(name) == stamp:
                    continue
                seen[name] = stamp
                h = m.handoff()
                if h and h.get("hub") == "secondary":
                    decided[name] = parse_rfc3339(h["decidedAt"])
                    del pending[name]
                    if self.hub_side is not None:
                        self.hub_side.moved(name)
            if pending:
                time.sleep(0.5)
        if self.hub_side is not None:
            patched = dict(self.hub_side.promotion)
            missing = sorted(set(decided) - set(patched))
            if missing:
                raise RuntimeError(f"{len(missing)} followers decided for B with no claim of B's written: {missing[:5]}")
        last_patched = max(answered for _sent, answered in patched.values())
        # Where the machine's two cores went from the first patch until the last follower had
        # decided (to within the 0.5 s this loop sleeps).
        promotion_cores = self.cores_between(cpu0, self.cpu_now(members))
        profiled = [f.result() for f in profiles]
        if profiler:
            profiler.shutdown()
        # From the patch's answer (the figure reported since 2026-12-03), and from its sending:
        # the commit lies between, so the true latency does too.
        latencies = [decided[name] - patched[name][1] for name in decided]
        from_sent = [decided[name] - patched[name][0] for name in decided]
        # What the hubs served in the minute from the first patch: the followers' reads (GET)
        # and watches, and what priority and fairness refused (429), the driver's PATCHes apart.
        time.sleep(max(0.0, first_sent + AFTER_PROMOTION - time.time()))
        after = dict(zip((s.cp.name for s in sides), self.pool.map(HubSide.scrape, sides)))
        driver1 = self.driver_requests()
        minute = {}
        for name in before:
            driver = {verb: k - driver0.get(name, {}).get(verb, 0) for verb, k in driver1.get(name, {}).items()}
            w = hub_window(before[name], after[name], len(members), driver)
            by_verb = w["requests_by_verb"]
            minute[name] = {"seconds": w["seconds"], "GET": by_verb.get("GET", 0.0), "WATCH": by_verb.get("WATCH", 0.0),
                            "driver": driver,
                            "PATCH": by_verb.get("PATCH", 0.0), "GET_latency": w["latency"]["GET"],
                            "refused_429": sum(n for (_verb, code), n in
                                               ((k, after[name].requests.get(k, 0.0) - before[name].requests.get(k, 0.0))
                                                for k in after[name].requests) if code == "429")}
        not_switched = [{"name": m.name, "alive": m.alive(), "handoff": m.handoff(), "status": m.status(), "log_tail": m.tail()}
                        for m in pending.values()]
        for f in not_switched:
            log(f"FAILURE: {f['name']} did not publish the secondary within {timeout:.0f} s of the promotion "
                f"(alive: {f['alive']})\n  handoff: {json.dumps(f['handoff'])}\n  /status: {json.dumps(f['status'])}"
                f"\n  log tail:\n{f['log_tail']}")
        return {
            "patches_s": last_patched - first_sent,
            "switched": len(decided),
            "first_patch_to_last_decision_s": max(decided.values()) - first_sent if decided else None,
            "per_follower_s": {
                "p50": percentile(latencies, 0.50), "p99": percentile(latencies, 0.99),
                "max": max(latencies) if latencies else None, "min": min(latencies) if latencies else None,
            },
            "per_follower_from_sent_s": {
                "p50": percentile(from_sent, 0.50), "p99": percentile(from_sent, 0.99),
                "max": max(from_sent) if from_sent else None, "min": min(from_sent) if from_sent else None,
            },
            "patch_round_trip_s": {
                "p50": percentile([a - s for s, a in patched.values()], 0.50),
                "p99": percentile([a - s for s, a in patched.values()], 0.99),
            },
            "timeout_s": timeout,
            "cores_until_last_decision": promotion_cores,
            "cpu_profiles": profiled,
            **per_follower(first_sent, patched, decided, {m.name: m.log for m in members}),
            "not_switched": not_switched,
            "after_promotion": minute,
        }


# ---------------------------------------------------------------------------------------------
# Output


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(results: list[dict[str, Any]]) -> str:
    head = ("| N | watch | req/s per hub (A / B) | followers' req/s per worker per hub (A / B) | hub CPU cores (A / B) "
            "| p99 GET ms (A / B) | p99 LIST ms (A / B) | promotion → last decision s | per follower p50 / p99 / max s "
            "| minute after: GET (A / B) | 429s | failures |")
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in results:
        hubs = [r["hubs"][name] for name in ("hub-a", "hub-b")]
        promo = r.get("promotion", {})
        per = promo.get("per_follower_s", {})

        def pair(get: Any, spec: str) -> str:
            return " / ".join(fmt(get(h), spec) for h in hubs)

        rows.append(" | ".join([
            f"| {r['n']}", ("on" if r["watch"] else "off") + ("" if r.get("build", "this") == "this" else f" ({r['build']})"),
            pair(lambda h: h["requests_per_s"], ".2f"),
            pair(lambda h: h["followers_requests_per_s_per_worker"], ".4f"),
            pair(lambda h: h["apiserver_cpu_cores"], ".3f"),
            pair(lambda h: h["latency"]["GET"]["p99_ms"], ".1f"),
            pair(lambda h: h["latency"]["LIST"]["p99_ms"], ".1f"),
            fmt(promo.get("first_patch_to_last_decision_s"), ".2f"),
            f"{fmt(per.get('p50'), '.2f')} / {fmt(per.get('p99'), '.2f')} / {fmt(per.get('max'), '.2f')}",
            " / ".join(fmt(promo.get("after_promotion", {}).get(name, {}).get("GET"), ".0f") for name in ("hub-a", "hub-b")),
            fmt(sum(m.get("refused_429", 0.0) for m in promo.get("after_promotion", {}).values()) if promo else None, ".0f"),
            str(sum(len(f["followers"]) for f in r["failures"])) + " |",
        ]))
    return "\n".join(rows)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for watch, color in ((True, "tab:blue"), (False, "tab:orange")):
        rs = sorted((r for r in results if r["watch"] == watch and r.get("build", "this") == "this" and "hubs" in r),
                    key=lambda r: r["n"])
        if not rs:
            continue
        ns = [r["n"] for r in rs]
        for hub, style in (("hub-a", "-o"), ("hub-b", "--s")):
            tag = f"watch {'on' if watch else 'off'}, {hub}"
            left.plot(ns, [r["hubs"][hub]["requests_per_s_per_worker"] for r in rs], style, color=color, label=tag)
            right.plot(ns, [r["hubs"][hub]["apiserver_cpu_cores"] for r in rs], style, color=color, label=tag)
    left.set(xscale="log", xlabel="followers (N)", ylabel="clusters requests/s per worker", title="Each hub: requests per worker")
    right.set(xscale="log", xlabel="followers (N)", ylabel="kube-apiserver CPU (cores)", title="Each hub: API server CPU")
    sizes = sorted({r["n"] for r in results})
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        ax.set_xticks(sizes, labels=[str(n) for n in sizes])
        ax.set_ylim(0, ax.get_ylim()[1] * 1.15)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def log(text: str) -> None:
    print(f"fleet: {text}", flush=True)


def timing(args: argparse.Namespace, watch: bool) -> tuple[float, float, float]:
    """The window, the warm-up and the start spread of a configuration, in seconds.

    With the watch, a follower reads every --watched-poll-interval (2 min) once both its
    watches have had a heartbeat, which on a quiet hub is the API server ending the watch at
    --watch-timeout (2 min). So the starts are spread over those 2 minutes, as a real fleet's
    phases are; the warm-up (130 s) lets the last follower's first watch end; and the window
    (240 s) holds two of each period, so that reads and re-watches (counted by the API server
    when a watch ends) are counted in full. Without the watch: spread over the 10 s poll
    interval, 20 s of warm-up, a 60 s window."""
    if watch:
        return (args.window or 240.0, args.warmup or 130.0, args.spread or 120.0)
    return (args.window or 60.0, args.warmup or 20.0, args.spread or 10.0)


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    if key == "HUB_WATCH":
        raise argparse.ArgumentTypeError("HUB_WATCH is set by the benchmark: each size runs with the watch on and off")
    return key, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000", help="fleet sizes, comma-separated (default 10,100,1000)")
    parser.add_argument("--window", type=float, help="measuring window in seconds, for watch on and off alike "
                        "(default 240 with the watch, 60 without)")
    parser.add_argument("--warmup", type=float, help="seconds from the last follower's start to the window "
                        "(default 130 with the watch, 20 without)")
    parser.add_argument("--spread", type=float, help="seconds over which the followers are started, evenly; give it the "
                        "interval of the reads when you change that (default 120 with the watch, 10 without)")
    parser.add_argument("--max-starting", type=int, default=50,
                        help="at most this many followers starting (not yet published) at once (default 50)")
    parser.add_argument("--patch-rate", type=float, metavar="PER_SECOND",
                        help="send the promotion's patches at most this many a second, as a controller's client "
                             "rate limit would (default: as fast as 16 threads get answers)")
    parser.add_argument("--profile", type=float, metavar="SECONDS",
                        help="take a CPU profile of each API server for SECONDS from the promotion's first patch, "
                             "into target/bench/fleet-N-HUB.pprof (`go tool pprof -top` reads it)")
    parser.add_argument("--promotion-timeout", type=float, default=120.0, help="seconds for every follower to switch (default 120)")
    parser.add_argument("--env", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="a setting for every follower; repeatable")
    parser.add_argument("--watch", choices=("both", "on", "off"), default="both",
                        help="run each size with the watch on, off, or both (default both)")
    parser.add_argument("--baseline", type=Path, metavar="BINARY",
                        help="another follower binary (an earlier build) run before this one at each size and watch "
                        "setting, on the same hubs, so that the two are compared in one run")
    parser.add_argument("--hub-side", choices=("patched", "real"), default="patched",
                        help="patched (default): the claims are written once, and the promotion patches every "
                             "Cluster from 16 threads; real: KubeSlice's own HA controller's hub side, with each "
                             "worker's erasure (fleet_hub_side.py)")
    parser.add_argument("--recheck", type=float, default=30.0,
                        help="with --hub-side real, the Active's re-check period in seconds (30 upstream)")
    parser.add_argument("--out", type=Path, default=REPO / "target" / "bench" / "fleet.json")
    parser.add_argument("--plot", type=Path, default=REPO / "target" / "bench" / "fleet.svg")
    args = parser.parse_args()
    args.env = dict(args.env)
    sizes = sorted({int(s) for s in args.sizes.split(",")})
    if min(sizes) < 1 or PORT_BASE + max(sizes) > int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0]):
        parser.error("sizes must be at least 1, and the listen ports must stay below the ephemeral range")
    try:
        import matplotlib  # noqa: F401 - checked before an hour of measuring, used at the end
    except ImportError:
        parser.error(f"matplotlib is missing: {sys.executable} -m pip install matplotlib (tests/k8s/fleet does this)")
    binary = Path(os.environ.get("HUB_FOLLOWER_RELEASE_BINARY", DEFAULT_BINARY))
    binary = binary if binary.is_absolute() else REPO / binary
    if not os.access(binary, os.X_OK):
        parser.error(f"no follower binary at {binary}")

    builds = {"this": binary}
    if args.baseline:
        baseline = args.baseline if args.baseline.is_absolute() else Path.cwd() / args.baseline
        if not os.access(baseline, os.X_OK):
            parser.error(f"--baseline: no executable at {baseline}")
        builds = {"baseline": baseline, "this": binary}
    watches = {"both": (True, False), "on": (True,), "off": (False,)}[args.watch]

    command = shlex.join(["tests/k8s/fleet", *sys.argv[1:]])
    settings = {
        "command": command,
        "sizes": sizes,
        "window_s": {"watch_on": timing(args, True)[0], "watch_off": timing(args, False)[0]},
        "warmup_s": {"watch_on": timing(args, True)[1], "watch_off": timing(args, False)[1]},
        "spread_s": {"watch_on": timing(args, True)[2], "watch_off": timing(args, False)[2]},
        "max_starting": args.max_starting,
        "promotion_timeout_s": args.promotion_timeout,
        "patch_rate_per_s": args.patch_rate,
        "hub_side": args.hub_side,
        "recheck_s": args.recheck if args.hub_side == "real" else None,
        "profile_s": args.profile,
        "follower_env": args.env,
        "follower_binary": str(binary),
        "baseline_binary": str(builds["baseline"]) if "baseline" in builds else None,
        "follower_binary_bytes": binary.stat().st_size,
        "tokens": "one reader ServiceAccount token per hub, shared by all followers",
        "restart_mode": "none", "log_level": "RUST_LOG=warn",
        "hub_follower_commit": subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO,
                                              capture_output=True, text=True).stdout.strip(),
        "machine": {"cpus": os.cpu_count(), "mem_total_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                    "kernel": os.uname().release},
    }
    print("command:", command)
    for key in ("sizes", "window_s", "warmup_s", "spread_s", "max_starting", "promotion_timeout_s", "patch_rate_per_s",
                "hub_side", "follower_env", "follower_binary", "tokens"):
        print(f"  {key}: {settings[key]}")
    print("  followers: one process each, HUB_RESTART_MODE=none, RUST_LOG=warn, otherwise the binary's defaults"
          + (" and the env above" if args.env else ""), flush=True)

    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    results: list[dict[str, Any]] = []
    planes: list[ControlPlane] = []
    hub_side: RealHubSide | None = None
    failed = False
    with ThreadPoolExecutor(max_workers=16) as pool:
        try:
            for name in ("hub-a", "hub-b"):
                planes.append(ControlPlane(name, WORK / name, Pki(WORK / name / "pki"), profiling=args.profile is not None).start())
            a, b = (HubSide(role, Hub(cp).install(), Admin(cp)) for role, cp in zip(("primary", "secondary"), planes))
            settings["kube_apiserver"] = json.loads(a.admin.expect("GET", "/version"))["gitVersion"]
            names = [f"worker-{i}" for i in range(max(sizes))]
            if args.hub_side == "real":
                log(f"creating {len(names)} Clusters on each hub; A's controller leads, B's mirrors, every worker erases on A")
                for side in (a, b):
                    side.create_clusters(names, pool)
                hub_side = RealHubSide(a, b, names, HubSide.patch_status, IDENTITY, recheck=args.recheck).start()
                hub_side.wait_pass(300)
            else:
                log(f"creating {len(names)} Clusters on each hub; both claim hub A")
                for side in (a, b):
                    side.create_clusters(names, pool)
                    side.claim(names, a.cp.endpoint, IDENTITY["primary"], pool)
            creds = Credentials(WORK / "credentials")
            for side in (a, b):
                creds.write(side, side.reader_token(24 * 3600))
            bench = Bench(args, builds, a, b, creds, pool, hub_side)
            for n in sizes:
                for watch in watches:
                    for build in builds:
                        result = bench.run(n, watch, build)
                        results.append(result)
                        failed = failed or bool(result["failures"])
                        write_json(args.out, settings, results)
        finally:
            if hub_side is not None:
                hub_side.stop()
            for cp in planes:
                cp.stop()

    print()
    print(table(results))
    plot(results, args.plot)
    print(f"\nJSON: {args.out}\nplot: {args.plot}\nlogs: {WORK}")
    if failed:
        print("FAILED: some followers did not follow (see failures in the JSON and above)")
    return 1 if failed else 0


def write_json(path: Path, settings: dict[str, Any], results: list[dict[str, Any]]) -> None:
    """Indented, but each per-follower sample on one line."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"settings": settings, "results": results}, indent=2)
    text = re.sub(r"\[\n\s+(\"worker-\d+\",[^\]]*?)\n\s+\]",
                  lambda m: "[" + re.sub(r",\n\s+", ", ", m.group(1)) + "]", text)
    path.write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
