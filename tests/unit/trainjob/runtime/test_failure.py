"""A runtime's failurePolicy as JobSet v0.12 reads and decides it (trainjob/runtime/failure.py),
pure: where a failure leads, the message it gives, and the message patterns it runs (bounded,
RE2). The worker's passes over it: tests/unit/worker_controller/test_failure_policy.py."""

from __future__ import annotations

from typing import Any

import pytest

from trainjob.runtime import failure
from trainjob.runtime.failure import Failed, FailurePolicy, Rule


def failed(job: str, rj: str, reason: str, since: str = "2026-11-29T10:00:00Z") -> Failed:
    return Failed(job, rj, reason, "m", since)


OOM = failed("tj-node-0", "node", "PodFailurePolicy", "2026-11-29T10:00:01Z")


LIMIT = failed("tj-launcher-0", "launcher", "BackoffLimitExceeded", "2026-11-29T10:00:00Z")


@pytest.mark.parametrize(
    ("policy", "counted", "want"),
    [
        (None, 0, (False, "FailedJobs", "tj-launcher-0")),
        (
            FailurePolicy(max_restarts=2),
            0,
            (True, "RestartJobSetFailurePolicyAction", "tj-launcher-0"),
        ),
        (FailurePolicy(max_restarts=2), 2, (False, "ReachedMaxRestarts", "tj-launcher-0")),
        (
            FailurePolicy(1, rules=(Rule("oom", "FailJobSet", reasons=("PodFailurePolicy",)),)),
            0,
            (False, "FailJobSetFailurePolicyAction", "tj-node-0"),
        ),
        (
            FailurePolicy(0, rules=(Rule("any", "RestartJobSetAndIgnoreMaxRestarts"),)),
            5,
            (True, "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction", "tj-launcher-0"),
        ),
        (  # a rule for another replicatedJob does not apply: the default restarts
            FailurePolicy(1, rules=(Rule("x", "FailJobSet", targets=("initializer",)),)),
            0,
            (True, "RestartJobSetFailurePolicyAction", "tj-launcher-0"),
        ),
        (  # the first rule that applies wins, with its own earliest failure
            FailurePolicy(
                3,
                rules=(
                    Rule("node", "FailJobSet", targets=("node",)),
                    Rule("all", "RestartJobSet"),
                ),
            ),
            0,
            (False, "FailJobSetFailurePolicyAction", "tj-node-0"),
        ),
    ],
)
def test_a_failure_leads_where_jobsets_policy_says(
    policy: FailurePolicy | None, counted: int, want: tuple[bool, str, str]
) -> None:
    verdict, culprit = failure.on_failure(policy, [OOM, LIMIT], counted)
    assert (verdict.restart, verdict.reason, culprit.job) == want
    # JobSet v0.12's message for each reason, naming the Job and why it failed
    assert verdict.message == (
        f"{JOBSET_MESSAGES[verdict.reason]} (first failed job: {culprit.job}); {culprit.reason}: m"
    )


JOBSET_MESSAGES = {
    "FailedJobs": "jobset failed due to one or more job failures",
    "FailJobSetFailurePolicyAction": "applying FailJobSet failure policy action",
    "ReachedMaxRestarts": "jobset failed due to reaching max number of restarts",
    "RestartJobSetFailurePolicyAction": "applying RestartJobSet failure policy action",
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction": (
        "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"
    ),
}


@pytest.mark.parametrize(
    ("reason", "message", "said"),
    [
        (
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
            ("; BackoffLimitExceeded: Job has reached the specified backoff limit"),
        ),
        ("DeadlineExceeded", "", "; DeadlineExceeded"),
        ("", "", ""),  # a Failed condition without either: nothing after the Job's name
    ],
)
def test_the_message_says_why_the_first_job_failed_with_what_its_condition_gave(
    reason: str, message: str, said: str
) -> None:
    culprit = Failed("tj-node-0", "node", reason, message, "2026-11-29T10:00:00Z")
    verdict, _ = failure.on_failure(None, [culprit], 0)
    assert verdict.message == (
        f"jobset failed due to one or more job failures (first failed job: tj-node-0){said}"
    )


def test_a_pattern_of_1024_characters_is_run_and_one_longer_is_not() -> None:
    assert failure.pattern_problem("a" * 1024) is None
    assert failure.pattern_problem("a" * 1025) == "longer than 1024 characters"


def test_the_policy_is_read_from_the_template_leaving_out_what_is_not_done_here() -> None:
    spec = {
        "failurePolicy": {
            "maxRestarts": 2,
            "restartStrategy": "BlockingRecreate",
            "rules": [
                {"name": "one", "action": "RestartJob"},
                {"action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
                {"name": "p", "action": "FailJobSet", "onJobFailureMessagePatterns": [".*"]},
            ],
        }
    }
    assert failure.parse(spec) == FailurePolicy(
        2,
        True,
        (
            Rule("failurePolicyRule1", "FailJobSet", ("DeadlineExceeded",)),
            Rule("p", "FailJobSet", patterns=(".*",)),
        ),
    )
    assert failure.parse({}) is None
    assert failure.parse({"failurePolicy": {"maxRestarts": -3}}) == FailurePolicy()


def test_patterns_beyond_the_policys_first_64_are_never_run() -> None:
    rules = [{"name": "many", "action": "FailJobSet", "onJobFailureMessagePatterns": ["nope"] * 64}]
    rules.append({"name": "late", "action": "FailJobSet", "onJobFailureMessagePatterns": [".*"]})
    policy = failure.parse({"failurePolicy": {"rules": rules}})
    assert policy is not None and policy.rules[1].patterns == (None,)
    failed = failure.Failed("tj-node-0", "node", "BackoffLimitExceeded", "anything", "t")
    assert not policy.rules[1].applies(failed)  # a rule left with patterns never run: no match


@pytest.mark.parametrize(
    ("patterns", "applies"),
    [
        (["OOM"], True),  # anywhere in the message, as Go's regexp.MatchString finds it
        (["^Pod .* was OOMKilled$"], False),
        (["^Job has reached"], True),
        (["(?i)backoff LIMIT"], True),
        (["nothing", "specified"], True),  # any of them
        (["(?<=x)y", "[unclosed"], False),  # RE2 refuses them: they never match
        (["(a+)+$"], False),  # no backtracking: linear in the message
    ],
)
def test_message_patterns_are_re2_expressions_searched_in_the_jobs_failure_message(
    patterns: list[str], applies: bool
) -> None:
    rule = Rule("r", "FailJobSet", patterns=tuple(patterns))
    failed = failure.Failed(
        "tj-node-0",
        "node",
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit (pod tj-node-0-0 OOM)" + "a" * 20000 + "!",
        "2026-11-22T12:00:00Z",
    )
    assert rule.applies(failed) is applies


def test_the_64_patterns_run_are_counted_across_rules_and_a_rule_not_an_object_is_left_out() -> (
    None
):
    rules: list[Any] = ["not a rule"]
    rules += [{"name": f"r{n}", "action": "FailJobSet"} for n in range(3)]
    for rule in rules[1:]:
        rule["onJobFailureMessagePatterns"] = [f"p{i}" for i in range(40)]
    policy = failure.parse({"failurePolicy": {"rules": rules}})
    assert policy is not None and [r.name for r in policy.rules] == ["r0", "r1", "r2"]
    assert policy.rules[0].patterns == tuple(f"p{i}" for i in range(40))
    assert policy.rules[1].patterns == (*(f"p{i}" for i in range(24)), *([None] * 16))
    assert policy.rules[2].patterns == (None,) * 40
