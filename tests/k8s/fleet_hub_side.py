"""KubeSlice's own HA controller's hub side over a whole fleet, for `fleet.py --hub-side real`:
what `ha_controller.py` does for one Cluster, done for every Cluster of the two hubs, with
each worker's erasure.

- **The Active's publisher** re-checks every `recheck` seconds (30 upstream) and writes, one
  write at a time, the claim {endpoint, caBundle, activeIdentity, lastUpdated} on each Cluster
  whose claim is missing or names another controller. It knows what is there from its own
  watch, as the real one does from its informer. No epoch; it never clears a claim.
- **The Standby's mirror** copies each change of the Active's claims onto its own hub, the
  erasures included.
- **Each worker erases** the claim on the hub it talks to as soon as it is written (the
  worker-operator v1.6.4 does within about 10 ms). A worker talks to hub A until its follower
  has decided for B; from then on it erases on B (the real worker restarts onto B and erases
  there at its first status write).
- **The promotion**: A's controller dies (its publisher and the mirror stop; A's API server
  stays up), and B's publisher writes B's claim on every Cluster at once, one at a time.

Writes are merge patches of `status.activeController` on the status subresource, each one
request, where the real controller updates the whole status: one write either way. Every
request the driver makes is counted here per hub and verb, so that the followers' own load can
be told apart from it.
"""

from __future__ import annotations

import base64
import http.client
import json
import queue
import threading
import time
from typing import Any, Callable

from ha_controller import Api, stamp

CLAIM_KEYS = ("endpoint", "caBundle", "activeIdentity", "identity", "lastUpdated", "epoch")


def claim_patch(claim: dict[str, Any] | None) -> dict[str, Any]:
    """A merge patch that makes status.activeController exactly `claim` (none: erased)."""
    if claim is None:
        return {"status": {"activeController": None}}
    return {"status": {"activeController": {k: claim.get(k) for k in CLAIM_KEYS}}}


class Counted:
    """The driver's own requests to one hub, by verb as the API server counts them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_verb: dict[str, int] = {}
        self.failed: list[str] = []

    def add(self, verb: str) -> None:
        with self.lock:
            self.by_verb[verb] = self.by_verb.get(verb, 0) + 1

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return dict(self.by_verb)


class RealHubSide:
    """The hub side over `names` on hubs `a` (primary, leading at first) and `b`. `patch(side,
    name, body)` writes one Cluster's status on that side (the fleet's kept-alive admin client);
    it returns when the answer came."""

    def __init__(self, a: Any, b: Any, names: list[str], patch: Callable[[Any, str, dict[str, Any]], None],
                 identities: dict[str, str], recheck: float = 30.0):
        self.sides = {"primary": a, "secondary": b}
        self.names = names
        self.patch_fn = patch
        self.identities = identities
        self.recheck = recheck
        self.counted = {role: Counted() for role in self.sides}
        self.apis = {role: Api(side.cp) for role, side in self.sides.items()}
        self.ca = {role: base64.b64encode(side.cp.pki.ca_crt.read_bytes()).decode() for role, side in self.sides.items()}
        # What each hub's watch last showed of each Cluster's claim.
        self.field: dict[str, dict[str, dict[str, Any] | None]] = {role: {} for role in self.sides}
        self.worker_on = {name: "primary" for name in names}
        self.leader = "primary"
        self.mirroring = True
        self.erasures: dict[str, queue.Queue[str]] = {role: queue.Queue() for role in self.sides}
        self.promotion: dict[str, tuple[float, float]] = {}  # name -> (sent, answered) of B's first claim
        self.passes = 0  # the publisher's passes over every Cluster, completed
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.leader_changed = threading.Event()
        self.threads: list[threading.Thread] = []

    # --- life

    def start(self) -> "RealHubSide":
        for role in self.sides:
            self._spawn(f"watch-{role}", lambda r=role: self._watch(r))
            self._spawn(f"erase-{role}", lambda r=role: self._erase(r))
        self._spawn("publisher", self._publish)
        return self

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        t = threading.Thread(target=target, name=name, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self) -> None:
        self.stop_event.set()
        self.leader_changed.set()
        for t in self.threads:
            t.join(30)

    def failures(self) -> list[str]:
        return [f"{role}: {f}" for role, c in self.counted.items() for f in c.failed[:5]]

    def requests(self) -> dict[str, dict[str, int]]:
        return {role: c.snapshot() for role, c in self.counted.items()}

    # --- what the driver does

    def promote(self) -> None:
        """A's controller dies; B's takes over and publishes at once (`promotion` records each
        Cluster's write)."""
        with self.lock:
            self.mirroring = False
            self.leader = "secondary"
            self.promotion = {}
        self.leader_changed.set()

    def restore(self) -> None:
        """Back to the start for the next fleet: every worker on A, A's controller leading
        again and B's mirroring it (a failback)."""
        with self.lock:
            for name in self.names:
                self.worker_on[name] = "primary"
            self.leader = "primary"
            self.mirroring = True
            self.promotion = {}
        self.leader_changed.set()

    def moved(self, name: str) -> None:
        """`name`'s follower decided for B: its worker now talks to B, and erases there."""
        with self.lock:
            self.worker_on[name] = "secondary"
        self.erasures["secondary"].put(name)

    def wait_pass(self, timeout: float) -> None:
        """Waits until the publisher has finished a pass begun after this call."""
        begun = self.passes + 1  # the pass under way, if any, may have begun before
        deadline = time.monotonic() + timeout
        while self.passes <= begun and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.passes <= begun:
            raise RuntimeError(f"the publisher finished no pass over {len(self.names)} Clusters in {timeout:.0f} s")

    # --- the parts

    def _mine(self, role: str) -> dict[str, Any]:
        return {"endpoint": self.sides[role].cp.endpoint, "caBundle": self.ca[role], "activeIdentity": self.identities[role]}

    def _write(self, role: str, name: str, claim: dict[str, Any] | None) -> bool:
        try:
            self.patch_fn(self.sides[role], name, claim_patch(claim))
        except (OSError, RuntimeError, http.client.HTTPException) as e:
            self.counted[role].failed.append(f"{name}: {e}")
            return False
        finally:
            self.counted[role].add("PATCH")
        return True

    def _publish(self) -> None:
        """The leader's publisher: a pass over every Cluster at each re-check, writing where its
        claim is missing or another's; a new leader's first pass at once."""
        leader = None
        while not self.stop_event.is_set():
            self.leader_changed.clear()
            with self.lock:
                now_leader = self.leader
            promoted = leader is not None and now_leader != leader
            leader = now_leader
            mine = self._mine(leader)
            whole = True
            for name in self.names:
                if self.stop_event.is_set() or self.leader != leader:
                    whole = False
                    break
                there = self.field[leader].get(name)
                if there and all(there.get(k) == v for k, v in mine.items()):
                    continue
                sent = time.time()
                if self._write(leader, name, {**mine, "lastUpdated": stamp(sent)}):
                    answered = time.time()
                    if promoted and leader == "secondary":
                        self.promotion.setdefault(name, (sent, answered))
            if whole:
                self.passes += 1
            self.leader_changed.wait(self.recheck)

    def _erase(self, role: str) -> None:
        """The workers on `role`: each erases the claim there as soon as it is written."""
        q = self.erasures[role]
        while not self.stop_event.is_set():
            try:
                name = q.get(timeout=0.5)
            except queue.Empty:
                continue
            if self.worker_on[name] == role and self.field[role].get(name) is not None:
                self._write(role, name, None)

    def _watch(self, role: str) -> None:
        """Every Cluster of the hub, as an informer follows them: what each claim is, then the
        workers' erasures on this hub and, on A while B mirrors, the copy onto B."""
        api, side = self.apis[role], self.sides[role]
        collection = f"/apis/controller.kubeslice.io/v1alpha1/namespaces/{side.hub.namespace}/clusters"
        while not self.stop_event.is_set():
            try:
                self.counted[role].add("LIST")
                code, listed = api.call("GET", collection, timeout=60)
                if code != 200:
                    raise ConnectionError(f"list: HTTP {code}")
                for obj in listed.get("items", []):
                    self._seen(role, obj)
                version = listed["metadata"]["resourceVersion"]
                while not self.stop_event.is_set():
                    self.counted[role].add("WATCH")
                    for event in api.watch(f"{collection}?allowWatchBookmarks=true", version, 290):
                        if self.stop_event.is_set():
                            return
                        obj = event.get("object") or {}
                        if event.get("type") == "ERROR":
                            raise ConnectionError(f"watch: {obj.get('message')}")
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if event.get("type") in ("ADDED", "MODIFIED"):
                            self._seen(role, obj)
            except (OSError, ValueError, KeyError, http.client.HTTPException, ConnectionError) as e:
                self.counted[role].failed.append(f"watch: {e}")
                self.stop_event.wait(1)

    def _seen(self, role: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name not in self.worker_on:
            return
        claim = (obj.get("status") or {}).get("activeController")
        before = self.field[role].get(name, "unseen")
        self.field[role][name] = claim
        if claim is not None and self.worker_on[name] == role:
            self.erasures[role].put(name)
        if role == "primary" and self.mirroring and claim != before:
            self._write("secondary", name, claim)
