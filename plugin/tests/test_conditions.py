"""Conditions as the CRDs take them: a message quoting a tenant's text is cut as Kueue cuts
its own, and a cut message set again is no change."""

from __future__ import annotations

import datetime as dt

from trainjob_api.conditions import CUT, MAX_MESSAGE, Change, Conditions, set_condition

NOW = dt.datetime(2026, 11, 28, 10, tzinfo=dt.timezone.utc)


def test_a_message_past_the_crds_limit_is_cut_to_it() -> None:
    """Before: a 234,112-character message (a tenant's cluster names) made every status
    write of the TrainJob fail."""
    long = "nonexistent-1," * 20_000
    (cond,) = set_condition([], "ClustersSelected", False, "NoCluster", long, NOW)
    assert len(cond["message"]) == MAX_MESSAGE
    assert cond["message"] == long[: MAX_MESSAGE - len(CUT)] + CUT
    short = set_condition([], "ClustersSelected", False, "NoCluster", "fits", NOW)
    assert short[0]["message"] == "fits"


def test_setting_the_same_long_message_again_changes_nothing() -> None:
    long = "x" * (MAX_MESSAGE * 2)
    first = Conditions([], NOW)
    assert first.set("RuntimeInvalid", True, "Bad", long) is Change.NEW
    again = Conditions(first.list, NOW)
    assert again.set("RuntimeInvalid", True, "Bad", long) is Change.NONE
