"""A stand-in for KubeSlice's own HA controller (kubeslice-controller `pkg/ha`, unreleased and
not buildable here: the Go proxy serves no version of it), built from what its source does.
One `HaController` runs beside each hub, against that hub's real API server:

- **Publisher.** While it leads, it re-checks every `recheck` seconds (30 upstream) and writes
  `status.activeController` = {endpoint, caBundle, activeIdentity, lastUpdated} by a
  whole-status update, only when endpoint, caBundle or activeIdentity differ from what is
  there. So `lastUpdated` changes only on such a write: an erased field is rewritten, an intact
  one never refreshed. No epoch; it never clears the field.
- **Mirror.** While it does not lead, a watch of the leader's Cluster copies the whole status
  onto its own hub's Cluster on every change, the worker's erasure included.
- **Lease.** The leader renews a Lease on its own hub every `renew` seconds. The Standby reads
  the leader's Lease; when it has seen no new `renewTime` for `lease + padding` seconds (15 + 5
  upstream), it stops mirroring, takes its own Lease and publishes at once. It times the
  renewals by its own clock (when it saw each new one), so a leader's skewed clock moves only
  its `lastUpdated`.
- **A recovered old Active is not demoted:** started again as leader, it leads beside the
  other and republishes itself.

The tests run it with shorter periods than upstream's (each test says which) so that a case
of minutes takes tens of seconds; the behaviour is the same.
"""

from __future__ import annotations

import base64
import http.client
import json
import ssl
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Iterator

from kube import ControlPlane, Hub

LEASE = "kubeslice-controller-ha"


def stamp(t: float) -> str:
    """A metav1.Time: RFC 3339 in whole seconds."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro(t: float) -> str:
    """A metav1.MicroTime, as a Lease's renewTime."""
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Api:
    """The hub's API server as its controller's admin client: one request per connection."""

    def __init__(self, cp: ControlPlane):
        self.cp = cp
        self.ctx = ssl.create_default_context(cafile=str(cp.pki.ca_crt))
        self.ctx.load_cert_chain(str(cp.admin[0]), str(cp.admin[1]))

    def _conn(self, timeout: float) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.cp.port, context=self.ctx, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
             timeout: float = 5) -> tuple[int, dict[str, Any]]:
        conn = self._conn(timeout)
        try:
            data = json.dumps(body).encode() if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": content_type, "Accept": "application/json"})
            r = conn.getresponse()
            raw = r.read()
            return r.status, (json.loads(raw) if raw else {})
        finally:
            conn.close()

    def watch(self, path: str, version: str, seconds: int) -> Iterator[dict[str, Any]]:
        """A watch's events from `version` until the API server ends it after `seconds`."""
        conn = self._conn(seconds + 10)
        try:
            conn.request("GET", f"{path}&watch=1&resourceVersion={version}&timeoutSeconds={seconds}",
                         headers={"Accept": "application/json"})
            r = conn.getresponse()
            if r.status != 200:
                raise ConnectionError(f"watch {path}: HTTP {r.status}")
            while True:
                line = r.readline()
                if not line:
                    return
                if line.strip():
                    yield json.loads(line)
        finally:
            conn.close()


class HaController:
    """The HA controller of `hub`, whose peer is `peer`. `start(leads=...)` runs it; `stop()`
    is its death (its API server stays up)."""

    def __init__(self, hub: Hub, peer: Hub, identity: str, *, recheck: float = 30, lease: float = 15,
                 padding: float = 5, renew: float = 2, skew: float = 0, endpoint: str | None = None):
        """`endpoint`: the one it publishes (its API server's unless given: a proxy in front)."""
        self.hub, self.peer, self.identity = hub, peer, identity
        self.endpoint = endpoint or hub.cp.endpoint
        self.recheck, self.lease, self.padding, self.renew, self.skew = recheck, lease, padding, renew, skew
        self.api, self.peer_api = Api(hub.cp), Api(peer.cp)
        self.ca = base64.b64encode(hub.cp.pki.ca_crt.read_bytes()).decode()
        self.cluster = f"/apis/controller.kubeslice.io/v1alpha1/namespaces/{hub.namespace}/clusters/{hub.cluster}"
        self.peer_cluster = f"/apis/controller.kubeslice.io/v1alpha1/namespaces/{peer.namespace}/clusters/{peer.cluster}"
        self.lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{hub.namespace}/leases/{LEASE}"
        self.peer_lease = f"/apis/coordination.k8s.io/v1/namespaces/{peer.namespace}/leases/{LEASE}"
        self.leads = False
        self.promoted_at: float | None = None
        self.publishes: list[float] = []  # when each claim write succeeded
        self.mirrored = 0  # status copies written
        self.failed: list[str] = []  # what went wrong that the real controller would not shrug off
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # --- life

    def start(self, leads: bool) -> "HaController":
        assert not self._threads, "already running"
        self._stop.clear()
        self.leads = leads
        self._threads = [threading.Thread(target=self._run, name=f"ha-{self.identity}", daemon=True)]
        if not leads:
            self._threads.append(threading.Thread(target=self._mirror, name=f"mirror-{self.identity}", daemon=True))
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        self._threads = []

    def check(self) -> None:
        assert not self.failed, f"the {self.identity} controller failed: {self.failed[:5]}"

    def now(self) -> float:
        return time.time() + self.skew

    # --- the leader

    def _run(self) -> None:
        renewed, checked = 0.0, 0.0
        seen: tuple[str | None, float] = (None, time.monotonic())  # the peer's renewTime, and when it was new
        while not self._stop.is_set():
            try:
                if self.leads:
                    if time.monotonic() - renewed >= self.renew:
                        self._renew()
                        renewed = time.monotonic()
                    if time.monotonic() - checked >= self.recheck:
                        # A write that failed (a conflict with the worker's) is tried again at
                        # the next tick; a check that found the field intact waits `recheck`.
                        if self._publish_if_needed() is not None:
                            checked = time.monotonic()
                else:
                    renew_time = self._peer_renew_time()
                    if renew_time is not None and renew_time != seen[0]:
                        seen = (renew_time, time.monotonic())
                    if time.monotonic() - seen[1] > self.lease + self.padding:
                        # Promotion: the mirror stops (it checks `leads` before each copy),
                        # the Lease is taken, and the claim published at once.
                        self.leads, self.promoted_at = True, time.time()
                        continue
            except (OSError, http.client.HTTPException):
                pass  # its own API server unreachable: it tries again, as controller-runtime does
            self._stop.wait(0.25)

    def _renew(self) -> None:
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": LEASE, "namespace": self.hub.namespace},
                 "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": int(self.lease), "renewTime": micro(self.now())}}
        code, body = self.api.call("PATCH", f"{self.lease_path}?fieldManager=ha-{self.identity}&force=true", lease,
                                   content_type="application/apply-patch+yaml")
        if code >= 300:
            self.failed.append(f"renewing its Lease: HTTP {code} {body.get('message')}")

    def _peer_renew_time(self) -> str | None:
        try:
            code, body = self.peer_api.call("GET", self.peer_lease, timeout=2)
        except (OSError, http.client.HTTPException):
            return None
        return body.get("spec", {}).get("renewTime") if code == 200 else None

    def _publish_if_needed(self) -> bool | None:
        """True: written; False: intact, nothing to do; None: the write failed (a conflict)."""
        code, obj = self.api.call("GET", self.cluster)
        if code != 200:
            self.failed.append(f"reading its Cluster: HTTP {code}")
            return None
        status = obj.get("status") or {}
        field = status.get("activeController") or {}
        mine = {"endpoint": self.endpoint, "caBundle": self.ca, "activeIdentity": self.identity}
        if all(field.get(k) == v for k, v in mine.items()):
            return False
        status["activeController"] = {**mine, "lastUpdated": stamp(self.now())}
        obj["status"] = status
        code, body = self.api.call("PUT", f"{self.cluster}/status", obj)
        if code == 409:
            return None
        if code != 200:
            self.failed.append(f"publishing its claim: HTTP {code} {body.get('message')}")
            return None
        self.publishes.append(time.time())
        return True

    # --- the Standby

    def _mirror(self) -> None:
        collection, _, name = self.peer_cluster.rpartition("/")
        while not self._stop.is_set() and not self.leads:
            try:
                code, obj = self.peer_api.call("GET", self.peer_cluster, timeout=2)
                if code != 200:
                    raise ConnectionError(f"HTTP {code}")
                self._copy(obj.get("status") or {})
                version = obj["metadata"]["resourceVersion"]
                for event in self.peer_api.watch(f"{collection}?fieldSelector=metadata.name%3D{name}", version, 5):
                    if self._stop.is_set() or self.leads:
                        return
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self._copy(event["object"].get("status") or {})
            except (OSError, ValueError, http.client.HTTPException, ConnectionError):
                self._stop.wait(1)  # the leader's API server unreachable: the informer retries

    def _copy(self, status: dict[str, Any]) -> None:
        for _ in range(5):
            if self._stop.is_set() or self.leads:
                return
            code, own = self.api.call("GET", self.cluster)
            if code != 200:
                self.failed.append(f"mirror: reading its Cluster: HTTP {code}")
                return
            if (own.get("status") or {}) == status:
                return
            own["status"] = status
            code, body = self.api.call("PUT", f"{self.cluster}/status", own)
            if code == 200:
                self.mirrored += 1
                return
            if code != 409:
                self.failed.append(f"mirror: writing its Cluster: HTTP {code} {body.get('message')}")
                return


@contextmanager
def ha_pair(a: Hub, b: Hub, a_id: str, b_id: str, **periods: float) -> Iterator[tuple[HaController, HaController]]:
    """A's controller leading and B's mirroring it, stopped however the block ends."""
    pair = (HaController(a, b, a_id, **periods), HaController(b, a, b_id, **periods))
    try:
        pair[0].start(leads=True)
        pair[1].start(leads=False)
        yield pair
    finally:
        for c in pair:
            c.stop()
