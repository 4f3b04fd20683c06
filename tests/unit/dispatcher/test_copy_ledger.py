"""What the dispatcher remembers of its dependencies' copies (dispatcher/workers/copy_ledger.py): a
copy is current for the jobs that own it, one pass at a time writes it, and a namespace's
refreshes come from its own allowance."""

from __future__ import annotations

from dispatcher.workers.copy_ledger import OWNERS_KEPT, CopyLedger

WHERE = ("worker1", "ns", "Secret/hf-token")


def test_a_copy_is_current_only_for_the_jobs_that_own_it() -> None:
    ledger = CopyLedger(per_second=1.0, burst=32)
    assert ledger.current("worker1", "ns", ["Secret/hf-token"], "wl-a") == {}
    ledger.note(WHERE, "d1", ["wl-a", "wl-b"])
    assert ledger.current("worker1", "ns", ["Secret/hf-token"], "wl-b") == {"Secret/hf-token": "d1"}
    assert ledger.current("worker1", "ns", ["Secret/hf-token"], "wl-c") == {}
    assert ledger.current("worker2", "ns", ["Secret/hf-token"], "wl-a") == {}


def test_the_owners_remembered_of_a_copy_are_bounded_the_first_kept() -> None:
    ledger = CopyLedger(per_second=1.0, burst=32)
    ledger.note(WHERE, "d1", [f"wl-{i}" for i in range(OWNERS_KEPT + 5)])
    held = {"Secret/hf-token": "d1"}
    for kept in ("wl-0", f"wl-{OWNERS_KEPT - 1}"):
        assert ledger.current("worker1", "ns", ["Secret/hf-token"], kept) == held, kept
    for dropped in (f"wl-{OWNERS_KEPT}", f"wl-{OWNERS_KEPT + 4}"):
        assert ledger.current("worker1", "ns", ["Secret/hf-token"], dropped) == {}, dropped


def test_one_pass_at_a_time_writes_a_copy_and_the_others_do_not_wait() -> None:
    ledger = CopyLedger(per_second=1.0, burst=32)
    with ledger.writing(WHERE) as first:
        with ledger.writing(WHERE) as second, ledger.writing(("worker2", *WHERE[1:])) as other:
            assert (first, second, other) == (True, False, True)
        with ledger.writing(WHERE) as third:
            assert not third  # the first still writes
    with ledger.writing(WHERE) as after:
        assert after


def test_each_namespace_draws_on_its_own_allowance() -> None:
    ledger = CopyLedger(per_second=1e-9, burst=32)
    assert all(ledger.allowed("busy") for _ in range(32))
    assert not ledger.allowed("busy")
    assert ledger.allowed("quiet")
