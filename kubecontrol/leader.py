"""Leader election on a coordination.k8s.io Lease, with client-go's rules.

Every replica keeps its watches and serves webhooks; only the leader writes. A replica takes
the Lease when it is free, or when its holder has not renewed it for `lease_duration` seconds
as timed by this replica's own clock (the renewTime written by another machine is never
compared with ours: clocks may differ). The leader renews every `retry_period`; when it has
not managed to for `renew_deadline`, it stops leading at once: `leading()` turns False by
itself, before any thread notices, and the writes it gates are refused from then on.

Three rules keep a write of ours from landing once a standby may lead:
- every Lease request is one try, bounded by `retry_period` (a request that hangs does not
  hold the campaign up past its deadlines);
- a renewal counts from the moment it was sent, not from its answer: the standby's clock starts
  when it sees the renewal, which is later still;
- `write_budget()` is the time left before the Lease could be taken over (`lease_duration` from
  the last renewal sent, less a margin for clocks that run at different rates): a gated write
  goes out with no longer a timeout than that (kubecontrol/cluster.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubebase.kinds import LEASE
from kubecontrol.client import ApiException
from kubecontrol.cluster import Cluster

log = logging.getLogger(__name__)
# Of the lease duration, the part a write may not use: clocks that run at different rates
# (client-go's leader election takes the same care with its JitterFactor of 1.2 for standbys).
CLOCK_MARGIN = 0.1


@dataclass(frozen=True)
class LeaseTimings:
    lease_duration: float = 15.0  # a standby waits this long after the last renewal it saw
    renew_deadline: float = 10.0  # the leader gives up when it could not renew for this long
    retry_period: float = 2.0  # how often the leader renews and a standby looks

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election needs lease duration > renew deadline > retry period > 0, got "
                f"{self.lease_duration} / {self.renew_deadline} / {self.retry_period}"
            )


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for `namespace/name` as `identity` in a thread of its own."""

    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        name: str,
        identity: str,
        timings: LeaseTimings,
        *,
        on_started: Callable[[], None] = lambda: None,
        on_stopped: Callable[[], None] = lambda: None,
    ) -> None:
        self._cluster, self._ns, self._name, self.identity = cluster, namespace, name, identity
        self._t = timings
        self._on_started, self._on_stopped = on_started, on_stopped
        self._renewed = 0.0  # monotonic time of our last successful acquire or renewal
        self._leading = False
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._stop = threading.Event()
        self.holder: str = ""  # who holds the Lease, as last seen ("" when free or unknown)
        self.transitions = 0

    # ---- what the rest of the process asks ---------------------------------------------------

    def leading(self) -> bool:
        """True while we hold the Lease and renewed it within the renew deadline."""
        return self._leading and time.monotonic() - self._renewed < self._t.renew_deadline

    def write_budget(self) -> float:
        """Seconds a write sent now may take and still land while no standby can lead: 0 when
        not leading."""
        if not self.leading():
            return 0.0
        until = self._renewed + self._t.lease_duration * (1 - CLOCK_MARGIN)
        return max(until - time.monotonic(), 0.0)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        """Stop campaigning; a leader hands the Lease back so a standby need not wait."""
        self._stop.set()
        if self._leading:
            self._set_leading(False)
            self._release()

    # ---- the campaign ------------------------------------------------------------------------

    def _run(self) -> None:
        where = f"{self._ns}/{self._name}"
        log.info("campaigning", extra={"lease": where, "identity": self.identity})
        waiting_logged = 0.0
        while not self._stop.is_set():
            try:
                ok = self._try_acquire_or_renew()
            except Exception as exc:  # API down, RBAC, ...: a standby keeps trying
                ok = False
                log.warning(
                    "Lease not acquired or renewed",
                    extra={"lease": where, "error": str(getattr(exc, "reason", exc))},
                )
            if ok and not self._leading and not self._stop.is_set():
                log.info("leading", extra={"lease": where, "identity": self.identity})
                self._set_leading(True)
            elif self._leading and not self.leading():
                log.error(
                    "stopped leading (no more writes): not renewed in time",
                    extra={"lease": where, "seconds": round(self._t.renew_deadline)},
                )
                self._set_leading(False)
            elif not ok and time.monotonic() - waiting_logged > 300:
                waiting_logged = time.monotonic()
                log.info("standing by", extra={"lease": where, "holder": self.holder or "nobody"})
            self._stop.wait(self._t.retry_period)

    def _set_leading(self, leading: bool) -> None:
        self._leading = leading
        (self._on_started if leading else self._on_stopped)()

    def _lease(self, method: str, body: dict[str, Any] | None = None) -> dict[str, Any] | None:
        """One Lease request, one try, bounded by the retry period; None for a 404 GET."""
        name = None if method == "POST" else self._name
        path = LEASE.path(self._ns, name)
        try:
            found: dict[str, Any] | None = self._cluster.send(
                method, path, body=body, timeout=self._t.retry_period
            )
        except ApiException as exc:
            if method == "GET" and exc.status == 404:
                return None
            raise
        return found

    def _try_acquire_or_renew(self) -> bool:
        lease = self._lease("GET")
        now = _now()
        sent = time.monotonic()  # a renewal counts from here (the rules above)
        if lease is None:
            self._lease("POST", self._lease_body(None, acquire_time=now, renew_time=now))
            self._renewed = sent
            self.holder, self.transitions = self.identity, 0
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:  # it moved: the holder is alive (by our clock)
            self._observed, self._observed_at = record, time.monotonic()
        self.holder = holder
        self.transitions = int(spec.get("leaseTransitions") or 0)
        duration = float(spec.get("leaseDurationSeconds") or self._t.lease_duration)
        held = holder and holder != self.identity
        if held and time.monotonic() - self._observed_at < duration:
            return False
        ours = holder == self.identity
        body = self._lease_body(
            lease,
            acquire_time=spec.get("acquireTime") if ours else now,
            renew_time=now,
            # client-go counts every change of holder, from a released Lease too
            transitions=self.transitions if ours else self.transitions + 1,
        )
        sent = time.monotonic()
        try:
            self._lease("PUT", body)
        except ApiException as exc:
            if exc.status == 409:  # someone else wrote it first: look again next round
                return False
            raise
        self._renewed = sent
        self.holder = self.identity
        return True

    def _lease_body(
        self,
        lease: dict[str, Any] | None,
        *,
        acquire_time: str | None,
        renew_time: str,
        transitions: int = 0,
    ) -> dict[str, Any]:
        meta = {"name": self._name, "namespace": self._ns}
        if lease is not None:
            meta["resourceVersion"] = lease["metadata"]["resourceVersion"]
        return {
            "apiVersion": LEASE.api_version,
            "kind": "Lease",
            "metadata": meta,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self._t.lease_duration),
                "acquireTime": acquire_time,
                "renewTime": renew_time,
                "leaseTransitions": transitions,
            },
        }

    def _release(self) -> None:
        """Give the Lease up (client-go's ReleaseOnCancel): an empty holder, a 1 s duration."""
        try:
            lease = self._lease("GET")
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"].update(holderIdentity="", leaseDurationSeconds=1)
            self._lease("PUT", lease)
            log.info(
                "Lease released",
                extra={"lease": f"{self._ns}/{self._name}", "identity": self.identity},
            )
        except Exception as exc:  # the standby takes over after the lease duration anyway
            log.warning(
                "Lease not released", extra={"lease": f"{self._ns}/{self._name}", "error": str(exc)}
            )
