"""What the dispatcher knows of its dependencies' copies on the workers (dependencies.py): the
content and owners each holds, which are being written this moment, and each namespace's
allowance of copy refreshes. One copy serves every job on its worker that references the
object, so a change of the object costs one write per worker, not one per job; the allowance
keeps a namespace that churns its Secrets and ConfigMaps from taking the dispatcher's writes
from the others."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kubebase.shares import Rates
from trainjob.lru import LRU

# How many copies the ledger remembers (each about 200 bytes and its owners' UIDs); one
# forgotten is read again from its worker once.
COPIES_KEPT = 50_000
# The owners remembered per copy: a job beyond them reads the copy from its worker on its
# passes (and writes only what it lacks).
OWNERS_KEPT = 1_000

Where = tuple[str, str, str]  # cluster, namespace, Kind/name


@dataclass(frozen=True)
class Held:
    """What a copy on a worker was last seen or made to hold: the digest of its content and
    the UIDs of the Workload copies that own it."""

    digest: str
    owners: frozenset[str]


class CopyLedger:
    def __init__(self, per_second: float, burst: int) -> None:
        self._held: LRU[Where, Held] = LRU(COPIES_KEPT)
        self._writing: set[Where] = set()
        self._lock = threading.Lock()
        self._rates = Rates(per_second, burst)

    def note(self, where: Where, digest: str, owners: Iterable[str]) -> None:
        """The copy at `where` holds the content of `digest` and is owned by `owners` (the
        first OWNERS_KEPT of them); forgotten on restart, when the next pass looks again (a
        read and, only if it differs, a write)."""
        kept: list[str] = []
        for uid in owners:
            if len(kept) == OWNERS_KEPT:
                break
            if uid and uid not in kept:
                kept.append(uid)
        self._held.put(where, Held(digest, frozenset(kept)))

    def forget(self, where: Where) -> None:
        """Nothing known of a copy at `where`: the object there is not ours (a worker's own
        runtime of the name, or anyone else's), so its next pass reads it before it spends a
        turn."""
        self._held.pop(where)

    def current(self, cluster: str, namespace: str, keys: list[str], owner: str) -> dict[str, str]:
        """What each copy of `keys` on a worker is known to hold while owned by the Workload
        copy `owner`: key -> digest, for those known."""
        found = {}
        for key in keys:
            held = self._held.get((cluster, namespace, key))
            if held is not None and owner in held.owners:
                found[key] = held.digest
        return found

    def needs_write(self, where: Where, digest: str, owner: str) -> bool:
        """Whether the copy at `where` is known to need a write for the Workload copy `owner`
        to find it holding `digest`: remembered as holding other content (or none), or
        without `owner` among all of its owners (not when the owners kept are cut short at
        OWNERS_KEPT: then only the worker knows)."""
        held = self._held.get(where)
        if held is None:
            return False
        if held.digest != digest:
            return True
        return owner not in held.owners and len(held.owners) < OWNERS_KEPT

    @contextmanager
    def writing(self, where: Where) -> Iterator[bool]:
        """True for the one pass that writes the copy at `where` now; False for any other at
        the same time, which does not wait (its next pass finds the copy made)."""
        with self._lock:
            mine = where not in self._writing
            self._writing.add(where)
        try:
            yield mine
        finally:
            if mine:
                with self._lock:
                    self._writing.discard(where)

    def allowed(self, namespace: str) -> bool:
        """Take one of the namespace's copy refreshes: whether it had one left."""
        return self._rates.take(namespace)
