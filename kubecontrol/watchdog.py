"""A watchdog for the watch caches: a frozen watch is noticed, and its informer lists again.

A watch stream can stop delivering events after API-server trouble with no error and no
reconnect (its connection left half-closed). A level-based controller with a frozen cache is
silently blind. So, every period, the watchdog lists the watched objects (their metadata only)
and compares their resourceVersions with the cache: an object that the API has held unchanged
for a whole period while the cache still shows another version (or none, or one the API no
longer has) means a frozen watch. Its informer then ends that watch and lists again
(`Informer.relist`), in the same process: nothing else is lost or restarted.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence

from kubebase.kinds import Kind
from kubecontrol.cluster import Cluster
from kubecontrol.informer import PAGE

log = logging.getLogger(__name__)
Versions = dict[Hashable, str]
SKIPS_TOLD = 5  # periods in a row a kind is not compared before it is said as a warning


def stale_keys(
    cached: Versions, listed: Versions, suspects: Versions
) -> tuple[set[Hashable], Versions]:
    """(keys the cache has been wrong about for a whole period, this period's suspects).

    A suspect is a key whose cached version differs from the listed one ("" when absent on
    either side); it is stale when it was a suspect with the same listed version last period
    too, i.e. the API did not change it meanwhile and the cache still did not catch up."""
    now: Versions = {}
    for key in set(cached) | set(listed):
        want, have = listed.get(key, ""), cached.get(key, "")
        if want != have:
            now[key] = want
    return {k for k, v in now.items() if suspects.get(k) == v}, now


class WatchDog:
    def __init__(
        self,
        cluster: Cluster,
        checks: Sequence[
            tuple[Kind, Callable[[], Iterable[tuple[Hashable, str]]], Callable[[], None]]
        ],
        period: float,
        pages: Mapping[str, int] | None = None,
    ) -> None:
        """`checks`: (kind, cached versions by (namespace, name), what to do
        when that cache is found frozen). `pages`: objects a list of a kind asks for at a
        time, by kind, as its informer asks (a page's bytes are held whole, and a kind a
        tenant sizes may carry a megabyte of metadata an object); 500 for the others."""
        self._cluster, self._checks, self._period = cluster, checks, period
        self._pages = dict(pages or {})
        self._suspects: dict[str, Versions] = {}
        self._skipped: dict[str, int] = {}  # periods in a row each kind was not compared

    def start(self, stop: threading.Event, ready: threading.Event) -> None:
        def run() -> None:
            ready.wait()
            while not stop.wait(self._period):
                self.check()

        threading.Thread(target=run, name="watchdog", daemon=True).start()

    def check(self) -> None:
        """Each kind compared in turn, on its own: one that cannot be compared this period (its
        list or its cache's read failed) is skipped, and the others are still compared; one
        skipped SKIPS_TOLD periods in a row is said as a warning, once, until it is compared
        again (a frozen cache of it could not be found meanwhile)."""
        for kind, cached_fn, on_stale in self._checks:
            try:
                self._compare(kind, cached_fn, on_stale)
            except Exception as exc:  # the API may be away: nothing to compare with
                skipped = self._skipped[kind.kind] = self._skipped.get(kind.kind, 0) + 1
                extra = {"cluster": self._cluster.name, "kind": kind.kind, "error": str(exc)}
                if skipped == SKIPS_TOLD:
                    log.warning("watch check skipped again and again", extra=extra)
                else:
                    log.debug("watch check skipped", extra=extra)
            else:
                self._skipped.pop(kind.kind, None)

    def _compare(
        self,
        kind: Kind,
        cached_fn: Callable[[], Iterable[tuple[Hashable, str]]],
        on_stale: Callable[[], None],
    ) -> None:
        listed: Versions = dict(self._cluster.versions(kind, page=self._pages.get(kind.kind, PAGE)))
        cached: Versions = dict(cached_fn())
        suspects = self._suspects.get(kind.kind, {})
        stale, self._suspects[kind.kind] = stale_keys(cached, listed, suspects)
        if stale:
            sample = ", ".join(str(k) for k in sorted(stale, key=str)[:5])
            log.error(
                "watch cache frozen: listing again",
                extra={
                    "cluster": self._cluster.name,
                    "kind": kind.kind,
                    "outOfDate": len(stale),
                    "seconds": round(self._period),
                    "sample": sample,
                },
            )
            on_stale()
            self._suspects[kind.kind] = {}
