"""Progress reports as Kubeflow Trainer defines them: what a report may hold, the patch it
becomes, what the trainer pods are given, how often reports are written (no cluster)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from tests.support.builders import initializer_runtime, make_trainjob
from trainjob import progress
from trainjob.models import parse_trainjob
from trainjob.runtime import resolve_runtime_info
from trainjob_api.views import RuntimeView

Dict = dict[str, Any]


def report(**status: Any) -> bytes:
    return orjson.dumps({"trainerStatus": {"lastUpdatedTime": "2026-11-26T10:00:00Z", **status}})


def refused(body: bytes) -> tuple[int, str]:
    with pytest.raises(progress.BadReport) as caught:
        progress.parse_report(body)
    return caught.value.code, caught.value.message


def test_path_and_audience_are_trainers() -> None:
    assert progress.status_path("team-a", "tj") == (
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/tj/status"
    )
    assert progress.audience("team-a", "tj") == (
        "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/tj/status"
    )


def test_a_report_as_the_sdk_sends_it_is_stored_in_trainers_form() -> None:
    body = orjson.dumps(
        {
            "trainerStatus": {
                "lastUpdatedTime": "2026-11-26T10:00:00.123456+00:00",
                "progressPercentage": 45,
                "estimatedRemainingSeconds": 120,
                "metrics": [{"name": "loss", "value": "0.15"}],
                "somethingNewer": 1,
            }
        }
    )
    assert progress.parse_report(body) == {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.15"}],
        "lastUpdatedTime": "2026-11-26T10:00:00Z",
    }
    assert list(progress.parse_report(body) or {}) == list(progress.FIELDS)  # Trainer's order
    assert progress.parse_report(b"{}") is None  # nothing to write


def test_each_bad_field_is_named() -> None:
    assert refused(b"not json")[0] == 400
    assert refused(b"[1]")[0] == 400
    assert refused(b"x" * (progress.MAX_REPORT_BYTES + 1))[0] == 413
    code, message = refused(report(progressPercentage=150))
    assert (code, "trainerStatus.progressPercentage" in message) == (422, True)
    assert "progressPercentage" in refused(report(progressPercentage=4.5))[1]
    assert "progressPercentage" in refused(report(progressPercentage=True))[1]
    assert "estimatedRemainingSeconds" in refused(report(estimatedRemainingSeconds=-1))[1]
    assert "metrics[0].value" in refused(report(metrics=[{"name": "loss", "value": 0.1}]))[1]
    assert "metrics[0].name" in refused(report(metrics=[{"name": "", "value": "1"}]))[1]
    assert "at most 256" in refused(report(metrics=[{"name": "m", "value": "1"}] * 257))[1]
    no_time = orjson.dumps({"trainerStatus": {"progressPercentage": 1}})
    assert "lastUpdatedTime: is required" in refused(no_time)[1]
    assert "RFC 3339" in refused(report(lastUpdatedTime="yesterday"))[1]


@pytest.mark.parametrize(
    "when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"], ids=["before-1", "9999"]
)
def test_a_time_whose_offset_leaves_the_calendar_is_refused_not_a_500(when: str) -> None:
    """Before: OverflowError escaped parse_report (500 and a traceback per request)."""
    code, message = refused(report(lastUpdatedTime=when))
    assert code == 422 and "lastUpdatedTime: out of range" in message


def test_an_early_year_is_written_with_four_digits() -> None:
    """Before: year 999 became `999-01-01T00:00:00Z`, which the CRD's date-time refuses."""
    parsed = progress.parse_report(report(lastUpdatedTime="0999-01-01T00:00:00Z"))
    assert parsed is not None and parsed["lastUpdatedTime"] == "0999-01-01T00:00:00Z"


def test_the_patch_replaces_the_last_report_whole() -> None:
    patch = progress.status_patch({"progressPercentage": 5, "lastUpdatedTime": "t"})
    assert patch == {
        "status": {
            "trainerStatus": {
                "progressPercentage": 5,
                "estimatedRemainingSeconds": None,
                "metrics": None,
                "lastUpdatedTime": "t",
            }
        }
    }


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ({"progressPercentage": 0, "estimatedRemainingSeconds": 0}, True),
        ({"progressPercentage": 100, "estimatedRemainingSeconds": 2**31 - 1}, True),
        ({"progressPercentage": 101}, False),
        ({"progressPercentage": -1}, False),
        ({"estimatedRemainingSeconds": 2**31}, False),
    ],
)
def test_a_reports_counts_are_kept_within_trainers_bounds_zero_included(
    given: Dict, kept: bool
) -> None:
    body = orjson.dumps({"trainerStatus": {**given, "lastUpdatedTime": "2026-11-26T10:00:00Z"}})
    if not kept:
        with pytest.raises(progress.BadReport):
            progress.parse_report(body)
        return
    assert progress.parse_report(body) == {**given, "lastUpdatedTime": "2026-11-26T10:00:00Z"}


def test_a_report_without_metrics_keeps_none() -> None:
    body = orjson.dumps({"trainerStatus": {"metrics": [], "lastUpdatedTime": "2026-11-26T10:00Z"}})
    assert progress.parse_report(body) == {"lastUpdatedTime": "2026-11-26T10:00:00Z"}


def _jwt(claims: Dict) -> str:
    part = base64.urlsafe_b64encode(orjson.dumps(claims)).rstrip(b"=").decode()
    return f"e30.{part}.sig"


def test_claims_are_read_from_the_token_without_trusting_them() -> None:
    token = _jwt({"aud": ["a", "b", 3], "exp": 5})
    assert progress.claims(token) == progress.Claims(5.0, ["a", "b"])
    assert progress.claims(_jwt({"aud": "a"})) == progress.Claims(None, ["a"])
    assert progress.claims(_jwt({"aud": {"a": 1}, "exp": "5"})) == progress.Claims(None, [])
    assert progress.claims(_jwt({"exp": True})) == progress.Claims(None, [])
    assert progress.claims(_jwt(["a"])) is None  # type: ignore[arg-type]
    assert progress.claims("not-a-jwt") is None
    assert progress.claims("a.!!!.c") is None


def test_only_the_trainer_pods_are_wired_and_what_the_runtime_set_is_replaced() -> None:
    runtime = initializer_runtime()
    trainer = runtime["spec"]["template"]["spec"]["replicatedJobs"][-1]
    container = trainer["template"]["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": progress.ENV_URL, "value": "mine"}, {"name": "KEEP", "value": "1"}]
    tj = parse_trainjob(make_trainjob(runtimeRef={"name": "torch-with-init"}))
    info, problem = resolve_runtime_info(tj, RuntimeView(runtime))
    assert info is not None, problem
    progress.wire(info.pod_sets, "https://srv/x", "ns", "tj")
    for ps in info.pod_sets:
        spec = ps.pod_template["spec"]
        if ps.role != "trainer":
            assert "volumes" not in spec or all(
                v["name"] != progress.VOLUME for v in spec["volumes"]
            )
            continue
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        assert env[progress.ENV_URL] == "https://srv/x" and env["KEEP"] == "1"
        assert env[progress.ENV_TOKEN] == "/var/run/secrets/kubeflow/trainer/token"
        (volume,) = [v for v in spec["volumes"] if v["name"] == progress.VOLUME]
        token, ca = volume["projected"]["sources"]
        assert token["serviceAccountToken"]["audience"] == progress.audience("ns", "tj")
        assert ca["configMap"]["name"] == "tj-tls-config"


def test_one_write_per_interval_and_the_newest_report_is_never_lost() -> None:
    throttle = progress.Throttle(interval=5.0)
    key = ("ns", "tj")
    assert throttle.offer(key, {"p": 1}, now=0.0) == progress.Offer(write=True)
    held = throttle.offer(key, {"p": 2}, now=1.0)
    assert held == progress.Offer(write=False, flush_in=4.0)
    assert throttle.offer(key, {"p": 3}, now=2.0) == progress.Offer(write=False)  # replaces
    assert throttle.take(key, now=5.0) == {"p": 3}
    assert throttle.take(key, now=5.0) is None
    assert throttle.offer(key, {"p": 4}, now=6.0).write is False  # 1 s after the held write
    assert throttle.offer(("ns", "other"), {"p": 1}, now=6.0).write is True
    assert throttle.offer(key, {"p": 5}, now=6.5) == progress.Offer(write=False)
    assert throttle.take(key, now=10.0) == {"p": 5}
    assert throttle.offer(key, {"p": 6}, now=15.0).write is True


def test_the_throttle_keeps_a_bounded_number_of_trainjobs() -> None:
    throttle = progress.Throttle(interval=5.0, limit=2)
    throttle.offer(("ns", "a"), {}, now=0.0)
    throttle.offer(("ns", "b"), {}, now=0.0)
    throttle.offer(("ns", "b"), {}, now=1.0)  # b holds a report
    with pytest.raises(progress.Full):
        throttle.offer(("ns", "c"), {}, now=1.0)
    assert throttle.offer(("ns", "c"), {}, now=6.0).write is True  # a was forgotten
    assert len(throttle) == 2


def test_a_namespace_writes_its_share_and_its_reports_wait_their_turn_newest_kept() -> None:
    """Before: every TrainJob of a namespace wrote once per interval, so one tenant's count of
    TrainJobs set the write rate of the API servers."""
    throttle = progress.Throttle(interval=5.0, namespace_rate=1.0, namespace_burst=2)
    first = [throttle.offer(("evil", f"tj-{i}"), {"p": 1}, now=0.0) for i in range(3)]
    assert [o.write for o in first] == [True, True, False]
    assert first[2].flush_in == progress.RETRY_SECONDS
    assert throttle.offer(("team-a", "tj"), {"p": 1}, now=0.0).write is True  # its own share
    assert throttle.offer(("evil", "tj-2"), {"p": 2}, now=0.5) == progress.Offer(write=False)
    assert throttle.take(("evil", "tj-2"), now=0.5) is None  # the namespace's share is spent
    assert throttle.holds(("evil", "tj-2"))
    assert throttle.take(("evil", "tj-2"), now=1.6) == {"p": 2}  # a second later: the newest
    assert not throttle.holds(("evil", "tj-2"))
