r"""A runtime's `failurePolicy`, run as JobSet v0.12 runs it (pure): which failed Job counts,
which rule applies, and whether the TrainJob fails or its Jobs are made again.

- **No failurePolicy**: the first Job to fail fails the TrainJob (JobSet's `FailedJobs`).
- **Rules**, in order: a rule applies to a failed Job when its `onJobFailureReasons` is empty
  or holds the reason of the Job's Failed condition (BackoffLimitExceeded, DeadlineExceeded,
  PodFailurePolicy, ...), its `onJobFailureMessagePatterns` is empty or one of them matches
  somewhere in that condition's message, and its `targetReplicatedJobs` is empty or names the
  Job's replicatedJob. The first rule that applies to some failed Job wins, with the earliest such
  failure; when none applies, `RestartJobSet` does, with the earliest failure of all.
- **Actions**: `FailJobSet` fails it (`FailJobSetFailurePolicyAction`); `RestartJobSet`
  restarts it (`status.restarts` and `status.restartsCountTowardsMax` grow by one) while the
  counted restarts are below `maxRestarts`, and fails it when they are not
  (`ReachedMaxRestarts`); `RestartJobSetAndIgnoreMaxRestarts` restarts it without counting.
- **A restart** makes every Job again: each Job carries its attempt (JobSet's
  `jobset.sigs.k8s.io/restart-attempt` label, `status.restarts` when it was made); Jobs of an
  older attempt are deleted (their pods first), and each is made again once its old one is
  gone (`restartStrategy: Recreate`, the default) or once all old ones are gone
  (`BlockingRecreate`).

The message patterns are a tenant's regular expressions in RE2's syntax (JobSet's, Go's
regexp): they run on RE2 itself (google-re2), whose matching time grows with the message and
never with backtracking. Compiling is what costs (RE2 holds the interpreter while it builds a
program), so a pattern is compiled within MAX_PATTERN_MEMORY, and whether it compiles is kept
by its text (VERDICTS_KEPT): admission and every pass ask only that, and a runtime's patterns
are compiled once, however often TrainJobs on it are judged. The compiled programs themselves
are kept for the matching a failed Job needs (PATTERNS_KEPT). At most MAX_PATTERNS of a policy
are run, so a pass compiles no more however many a runtime lists. A pattern RE2 refuses, one
that needs more than MAX_PATTERN_MEMORY (`\pL{40}`: a Unicode class repeated), longer than
MAX_PATTERN_LENGTH or beyond MAX_PATTERNS never matches (JobSet skips one that does not
compile) and RuntimeFieldsIgnored names it.

Not done here, and named by the RuntimeFieldsIgnored condition (fields.py): rules with the
per-Job actions `RestartJob` and `RestartJobAndIgnoreMaxRestarts` are skipped, as if they were
not there; `InPlaceRestart` restarts by recreating, as `Recreate` does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import re2

from kubebase.objects import Dict
from trainjob.lru import LRU

FAIL_JOBSET = "FailJobSet"
RESTART_JOBSET = "RestartJobSet"
RESTART_IGNORING_MAX = "RestartJobSetAndIgnoreMaxRestarts"
DONE_ACTIONS = frozenset({FAIL_JOBSET, RESTART_JOBSET, RESTART_IGNORING_MAX})
RECREATE, BLOCKING_RECREATE = "Recreate", "BlockingRecreate"

# JobSet v0.12's reasons and messages (its pkg/constants), on the Failed condition and the
# restart Events.
REASON_FAILED_JOBS = "FailedJobs"
MESSAGE_FAILED_JOBS = "jobset failed due to one or more job failures"
REASON_FAIL_ACTION = "FailJobSetFailurePolicyAction"
MESSAGE_FAIL_ACTION = "applying FailJobSet failure policy action"
REASON_MAX_RESTARTS = "ReachedMaxRestarts"
MESSAGE_MAX_RESTARTS = "jobset failed due to reaching max number of restarts"
REASON_RESTART = "RestartJobSetFailurePolicyAction"
MESSAGE_RESTART = "applying RestartJobSet failure policy action"
REASON_RESTART_IGNORING_MAX = "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction"
MESSAGE_RESTART_IGNORING_MAX = "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"


MAX_PATTERN_LENGTH = 1024
# Bytes RE2 may use for one compiled pattern. Compiling `\pL{40}a` took 44 ms at 1 MiB and is
# refused in 9 ms at 256 KiB; `\pL{10}x` compiles in 3 ms, and patterns that name words, codes
# or ranks (`NCCL (timeout|error) .*rank \d+`) take microseconds (benchmarks/hostile_inputs.py).
MAX_PATTERN_MEMORY = 256 << 10
# What makes a compile costly is a Unicode class (`\pL`, `\P{Han}`: thousands of ranges),
# repeated: with at most this many in a pattern, the worst took 8 ms to compile or refuse
# (`\pL{7}\pN{7}`), where 64 of `\pL*?` repeated to 1,024 characters cost 1.7 s a review.
MAX_UNICODE_CLASSES = 2
MAX_PATTERNS = 64  # of one failurePolicy, over all its rules
PATTERNS_KEPT = MAX_PATTERNS  # compiled patterns kept: one policy's, at the most
# Patterns whose verdict (compiles or not) is kept, by their text: at most 1,024 characters
# each, so 4 MiB of keys at the most; 64 runtimes' worth of distinct patterns.
VERDICTS_KEPT = 4096
_VERDICTS: LRU[str, bool] = LRU(VERDICTS_KEPT)


def patterns(rules: list[Any]) -> list[list[str | None]]:
    """Each rule's message patterns, in order; None for one beyond the policy's first
    MAX_PATTERNS (never run: it never matches)."""
    out, seen = [], 0
    for rule in rules:
        listed = rule.get("onJobFailureMessagePatterns") if isinstance(rule, dict) else None
        listed = listed if isinstance(listed, list) else []
        out.append([str(p) if seen + j < MAX_PATTERNS else None for j, p in enumerate(listed)])
        seen += len(listed)
    return out


def pattern_problem(pattern: str | None) -> str | None:
    """Why a pattern of a policy never matches (None: it is run)."""
    if pattern is None:
        return f"beyond the policy's first {MAX_PATTERNS} patterns"
    if len(pattern) > MAX_PATTERN_LENGTH:
        return f"longer than {MAX_PATTERN_LENGTH} characters"
    if unicode_classes(pattern) > MAX_UNICODE_CLASSES:
        return f"more than {MAX_UNICODE_CLASSES} Unicode classes (\\p, \\P)"
    runs = _VERDICTS.get_or_make(pattern, lambda: compiled(pattern) is not None)
    return None if runs else f"not an RE2 pattern within {MAX_PATTERN_MEMORY >> 10} KiB"


def unicode_classes(pattern: str) -> int:
    """How many Unicode classes a pattern names (counted on its text: an escaped backslash
    before a `p` counts too, which only errs toward refusing)."""
    return pattern.count("\\p") + pattern.count("\\P")


@functools.lru_cache(maxsize=PATTERNS_KEPT)
def compiled(pattern: str) -> Any | None:
    """`pattern` compiled by RE2, or None when it is not a pattern RE2 takes within bounds."""
    if len(pattern) > MAX_PATTERN_LENGTH or unicode_classes(pattern) > MAX_UNICODE_CLASSES:
        return None
    options = re2.Options()
    options.log_errors = False
    options.max_mem = MAX_PATTERN_MEMORY
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


@dataclass(frozen=True)
class Rule:
    name: str
    action: str
    reasons: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    patterns: tuple[str | None, ...] = ()  # None: a pattern not run (patterns())

    def applies(self, failed: Failed) -> bool:
        return (
            (not self.reasons or failed.reason in self.reasons)
            and (not self.patterns or any(_matches(p, failed.message) for p in self.patterns))
            and (not self.targets or failed.replicated_job in self.targets)
        )


def _matches(pattern: str | None, message: str) -> bool:
    found = None if pattern is None else compiled(pattern)
    return found is not None and found.search(message) is not None


@dataclass(frozen=True)
class FailurePolicy:
    max_restarts: int = 0
    blocking: bool = False  # BlockingRecreate: no new Job while an old one remains
    rules: tuple[Rule, ...] = ()


@dataclass(frozen=True)
class Failed:
    """A Job of the current attempt that failed: its replicatedJob, and its Failed
    condition's reason, message and time."""

    job: str
    replicated_job: str
    reason: str
    message: str
    since: str


@dataclass(frozen=True)
class Verdict:
    """What a failure leads to: the TrainJob failed (`reason`, `message`), or restarted
    (`counts`: toward maxRestarts; `reason`, `message`: the Warning Event's)."""

    restart: bool
    reason: str
    message: str
    counts: bool = False


def parse(template_spec: Dict | None) -> FailurePolicy | None:
    """The JobSet template's failurePolicy (None: it has none). The CRD has checked its
    shape where it is Trainer's; what is not of it is left out rather than guessed at."""
    found = (template_spec or {}).get("failurePolicy")
    if not isinstance(found, dict):
        return None
    rules = []
    listed = found.get("rules") or []
    for i, (rule, run) in enumerate(zip(listed, patterns(listed), strict=True)):
        if not isinstance(rule, dict) or rule.get("action") not in DONE_ACTIONS:
            continue  # RestartJob*: not done here (fields.py names it)
        rules.append(
            Rule(
                name=str(rule.get("name") or f"failurePolicyRule{i}"),
                action=str(rule["action"]),
                reasons=tuple(str(r) for r in rule.get("onJobFailureReasons") or []),
                targets=tuple(str(t) for t in rule.get("targetReplicatedJobs") or []),
                patterns=tuple(run),
            )
        )
    max_restarts = found.get("maxRestarts")
    return FailurePolicy(
        max_restarts=max_restarts if isinstance(max_restarts, int) and max_restarts > 0 else 0,
        blocking=found.get("restartStrategy") == BLOCKING_RECREATE,
        rules=tuple(rules),
    )


def _earliest(failures: Iterable[Failed]) -> Failed | None:
    return min(failures, key=lambda f: (f.since, f.job), default=None)


def on_failure(
    policy: FailurePolicy | None, failures: list[Failed], counted: int
) -> tuple[Verdict, Failed]:
    """What the failed Jobs of the current attempt (at least one) lead to, and the failure
    that decided it. `counted`: the restarts counted toward maxRestarts so far."""
    first = _earliest(failures)
    assert first is not None, "on_failure needs a failure"
    if policy is None:
        return Verdict(False, REASON_FAILED_JOBS, _with(MESSAGE_FAILED_JOBS, first)), first
    action, culprit = RESTART_JOBSET, first
    for rule in policy.rules:
        matched = _earliest(f for f in failures if rule.applies(f))
        if matched is not None:
            action, culprit = rule.action, matched
            break
    if action == FAIL_JOBSET:
        return Verdict(False, REASON_FAIL_ACTION, _with(MESSAGE_FAIL_ACTION, culprit)), culprit
    if action == RESTART_IGNORING_MAX:
        message = _with(MESSAGE_RESTART_IGNORING_MAX, culprit)
        return Verdict(True, REASON_RESTART_IGNORING_MAX, message), culprit
    if counted >= policy.max_restarts:
        return Verdict(False, REASON_MAX_RESTARTS, _with(MESSAGE_MAX_RESTARTS, culprit)), culprit
    return Verdict(True, REASON_RESTART, _with(MESSAGE_RESTART, culprit), counts=True), culprit


def _with(message: str, failed: Failed) -> str:
    """JobSet's message, naming the first failed Job (as JobSet does) and why it failed."""
    why = ": ".join(x for x in (failed.reason, failed.message) if x)
    return f"{message} (first failed job: {failed.job}){f'; {why}' if why else ''}"
