"""What `kubectl trainjob` prints, from the objects it read (pure): a TrainJob's state in a
word, the `list` table and the `describe` text. The manager's objects are read through the
views the plugin shares with the controllers (plugin/trainjob_api/views.py); what the worker
shows, through the story's types (plugin/trainjob_api/story.py), whether the manager's
view.trainjob.dev API told it or the worker was read directly."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from trainjob_api import conditions as cond
from trainjob_api import constants as c
from trainjob_api.story import Condition as StoryCondition
from trainjob_api.story import Copy, Event, Pod, PodUsage
from trainjob_api.views import ConditionView, PodSetPhases, TrainJobView, WorkloadView

# Characters a terminal acts on rather than shows: C0 controls but newline and tab, DEL, and
# the C1 controls (U+0080-U+009F: some terminals take U+009B as CSI, U+009D as OSC).
_CONTROLS = {
    code: ("^[" if code == 0x1B else "\\r" if code == 0x0D else f"\\x{code:02x}")
    for code in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]
    if chr(code) not in "\n\t"
}


def printable(text: str) -> str:
    """`text` with the controls a terminal would act on written out instead, as kubectl
    escapes what it prints since CVE-2021-25743 (ESC as `^[`, CR as `\\r`; the others as
    `\\xNN`): a tenant's metric name, condition message or Event cannot move the cursor,
    clear the screen, write the viewer's clipboard or hide a link."""
    return text.translate(_CONTROLS)


def state_of(tj: TrainJobView) -> str:
    """Complete, Failed (reason), Running, Queued (suspended, waiting for quota or a worker) or
    Created, as a user would say it."""
    if tj.is_true(c.COND_COMPLETE):
        return "Complete"
    failed = tj.condition(c.COND_FAILED)
    if failed is not None and failed.true:
        return f"Failed ({failed.reason})"
    if tj.suspended:
        return "Queued"
    if tj.running_somewhere:
        return "Running"
    return "Created"


def age(timestamp: str | None, now: dt.datetime) -> str:
    """kubectl's short age: 45s, 12m, 3h, 2d."""
    if not timestamp:
        return "-"
    seconds = max(0, int((now - cond.parse_time(timestamp)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def table(rows: Iterable[Iterable[str]], header: list[str]) -> str:
    """Columns padded to their widest cell, as kubectl prints them."""
    lines = [header, *[list(r) for r in rows]]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


PHASES = PodSetPhases.PHASES


def pods_in_short(tj: TrainJobView) -> str:
    """status.podsStatus summed over the PodSets, the phases that have pods: `2 running,
    1 pending`; `-` when the status has no count (no pods yet, or not watched)."""
    counts = tj.pods_status
    if not counts:
        return "-"
    totals = {ph: sum(p.count(ph) for p in counts) for ph in PHASES}
    return ", ".join(f"{n} {ph}" for ph, n in totals.items() if n) or "0"


def duration(seconds: int) -> str:
    """1h05m, 4m30s, 12s."""
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_in_short(tj: TrainJobView) -> str:
    """`45% 4m30s left` from status.trainerStatus (what the training reported); `-` when it
    reported nothing."""
    ts = tj.trainer_status
    if ts is None:
        return "-"
    percent, left = ts.percent, ts.seconds_left
    parts = [f"{percent}%" if percent is not None else "", f"{duration(left)} left" if left else ""]
    return " ".join(p for p in parts if p) or "-"


def progress_bar(tj: TrainJobView, now: dt.datetime, width: int = 30) -> str | None:
    """`[#############-----------------]  45%  about 4m30s left  (reported 12s ago)`, then
    the latest metrics; None when the training reported nothing."""
    ts = tj.trainer_status
    if ts is None:
        return None
    percent = ts.percent
    if percent is None:
        bar = "[" + "?" * width + "]   ?%"
    else:
        done = round(width * min(100, max(0, percent)) / 100)
        bar = f"[{'#' * done}{'-' * (width - done)}] {percent:3d}%"
    if ts.seconds_left is not None:
        bar += f"  about {duration(ts.seconds_left)} left"
    bar += f"  (reported {age(ts.reported_at, now)} ago)"
    metrics = "  ".join(f"{name}={value}" for name, value in ts.metrics)
    return f"{bar}\n{metrics}" if metrics else bar


def list_table(trainjobs: list[TrainJobView], now: dt.datetime, all_namespaces: bool) -> str:
    header = ["NAME", "STATE", "WORKER", "PODS", "PROGRESS", "QUEUE", "AGE"]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    rows = []
    for tj in sorted(trainjobs, key=lambda t: t.key):
        row = [
            tj.name,
            state_of(tj),
            tj.cluster_name or "-",
            pods_in_short(tj),
            progress_in_short(tj),
            tj.queue_name or "-",
            age(tj.created, now),
        ]
        if all_namespaces:
            row.insert(0, tj.namespace)
        rows.append(row)
    return table(rows, header)


CONDITION_COLUMNS = ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]


def _conditions(
    found: Iterable[ConditionView | StoryCondition], now: dt.datetime
) -> list[list[str]]:
    return [
        [x.type, x.status, x.reason or "", age(since_of(x), now), x.message or ""] for x in found
    ]


def since_of(x: ConditionView | StoryCondition) -> str | None:
    return x.since if isinstance(x, ConditionView) else x.last_transition_time


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in text.splitlines())


def _section(title: str, rows: list[list[str]], header: list[str]) -> str:
    if not rows:
        return f"{title}: none"
    return f"{title}:\n{_indent(table(rows, header))}"


def _events(events: list[Event], now: dt.datetime) -> list[list[str]]:
    return [
        [
            e.type or "",
            e.reason or "",
            age(e.last_timestamp, now),
            e.object.partition("/")[2],
            e.message,
        ]
        for e in sorted(events, key=lambda e: e.last_timestamp or "")[-15:]
    ]


EVENT_COLUMNS = ["TYPE", "REASON", "AGE", "OBJECT", "MESSAGE"]


def _progress_lines(tj: TrainJobView, now: dt.datetime) -> list[str]:
    bar = progress_bar(tj, now)
    if bar is None:
        return ["Progress:    none reported"]
    first, *metrics = bar.splitlines()
    return [f"Progress:    {first}", *(f"Metrics:     {m}" for m in metrics)]


def describe(
    tj: TrainJobView,
    workload: WorkloadView | None,
    events: list[Event],
    worker: WorkerView | None,
    now: dt.datetime,
) -> str:
    """The manager TrainJob with its Workload and Events, then what its worker shows."""
    lines = [
        f"Name:        {tj.name}",
        f"Namespace:   {tj.namespace}",
        f"State:       {state_of(tj)}",
        f"Worker:      {tj.cluster_name or '-'}",
        f"Queue:       {tj.queue_name or '-'}",
        f"Runtime:     {tj.runtime_name or '-'}",
        f"Managed by:  {tj.managed_by or c.MANAGED_BY_BUILTIN}",
        _section("Conditions", _conditions(tj.condition_views, now), CONDITION_COLUMNS),
        *_progress_lines(tj, now),
        _section(
            "Pods by phase",
            [[p.name, *(str(p.count(ph)) for ph in PHASES)] for p in tj.pods_status],
            ["PODSET", *(ph.upper() for ph in PHASES)],
        ),
    ]
    if workload is not None:
        checks = [[x.name, x.state, x.message] for x in workload.checks]
        lines += [
            f"Workload:    {workload.name} (ClusterQueue {workload.cluster_queue or '-'}, "
            f"active {workload.active})",
            _indent(_section("Admission checks", checks, ["NAME", "STATE", "MESSAGE"])),
            _indent(
                _section(
                    "Conditions", _conditions(workload.condition_views, now), CONDITION_COLUMNS
                )
            ),
        ]
    else:
        lines.append("Workload:    none")
    lines.append(_section("Events", _events(events, now), EVENT_COLUMNS))
    if worker is not None:
        lines.append(worker.render(now))
    return "\n".join(lines)


def _usage(usage: PodUsage | None) -> list[str]:
    """A pod's CPU and memory use as `kubectl top pod` writes them ("-" when not measured)."""
    if usage is None:
        return ["-", "-"]
    return [f"{usage.cpu_millicores}m", f"{-(-usage.memory_bytes // 2**20)}Mi"]


class WorkerView:
    """What the worker running a TrainJob shows: our copy, its pods, their Events (the
    story's types); or why it could not be read."""

    def __init__(
        self,
        name: str,
        copy: Copy | None = None,
        pods: list[Pod] | None = None,
        events: list[Event] | None = None,
        error: str | None = None,
    ) -> None:
        self.name, self.copy, self.error = name, copy, error
        self.pods, self.events = pods or [], events or []

    def render(self, now: dt.datetime) -> str:
        if self.error:
            return f"On worker {self.name}: {self.error}"
        if self.copy is None:
            return (
                f"On worker {self.name}: no TrainJob (not created yet, or removed after it ended)"
            )
        measured = any(p.usage for p in self.pods)
        pods = [
            [
                p.name,
                p.phase or "",
                p.node or "-",
                age(p.creation_timestamp, now),
                *(_usage(p.usage) if measured else []),
            ]
            for p in sorted(self.pods, key=lambda p: p.name)
        ]
        pod_columns = ["NAME", "PHASE", "NODE", "AGE", *(["CPU", "MEMORY"] if measured else [])]
        status = self.copy.status
        jobs = [
            [j.name, *(str(n) for n in (j.active, j.ready, j.succeeded, j.failed))]
            for j in status.jobs_status
        ]
        parts = [
            f"On worker {self.name}:",
            _indent(_section("Conditions", _conditions(status.conditions, now), CONDITION_COLUMNS)),
            _indent(_section("Jobs", jobs, ["NAME", "ACTIVE", "READY", "SUCCEEDED", "FAILED"])),
            _indent(_section("Pods", pods, pod_columns)),
            _indent(_section("Events", _events(self.events, now), EVENT_COLUMNS)),
        ]
        return "\n".join(parts)
