"""What `kubectl trainjob` prints, from the objects it read (pure): a TrainJob's state in a
word, the `list` table and the `describe` text."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

from kubecontrol.objects import Dict
from trainjob import conditions as cond
from trainjob import constants as c

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


def state_of(tj: Dict) -> str:
    """Complete, Failed (reason), Running, Queued (suspended, waiting for quota or a worker) or
    Created, as a user would say it."""
    status = tj.get("status") or {}
    conditions = list(status.get("conditions") or [])
    if cond.is_true(conditions, c.COND_COMPLETE):
        return "Complete"
    failed = cond.find(conditions, c.COND_FAILED)
    if failed and failed.get("status") == "True":
        return f"Failed ({failed.get('reason', '')})"
    if (tj.get("spec") or {}).get("suspend"):
        return "Queued"
    if status.get("clusterName") or status.get("jobsStatus"):
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


PHASES = ("pending", "running", "succeeded", "failed", "unknown")


def pods_in_short(tj: Dict) -> str:
    """status.podsStatus summed over the PodSets, the phases that have pods: `2 running,
    1 pending`; `-` when the status has no count (no pods yet, or not watched)."""
    counts = (tj.get("status") or {}).get("podsStatus") or []
    if not counts:
        return "-"
    totals = {ph: sum(int(p.get(ph) or 0) for p in counts) for ph in PHASES}
    return ", ".join(f"{n} {ph}" for ph, n in totals.items() if n) or "0"


def duration(seconds: int) -> str:
    """1h05m, 4m30s, 12s."""
    hours, rest = divmod(max(0, seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_in_short(tj: Dict) -> str:
    """`45% 4m30s left` from status.trainerStatus (what the training reported); `-` when it
    reported nothing."""
    ts = (tj.get("status") or {}).get("trainerStatus") or {}
    percent, left = ts.get("progressPercentage"), ts.get("estimatedRemainingSeconds")
    parts = [f"{percent}%" if percent is not None else "", f"{duration(left)} left" if left else ""]
    return " ".join(p for p in parts if p) or "-"


def progress_bar(tj: Dict, now: dt.datetime, width: int = 30) -> str | None:
    """`[#############-----------------]  45%  about 4m30s left  (reported 12s ago)`, then
    the latest metrics; None when the training reported nothing."""
    ts = (tj.get("status") or {}).get("trainerStatus") or {}
    if not ts:
        return None
    percent = ts.get("progressPercentage")
    if percent is None:
        bar = "[" + "?" * width + "]   ?%"
    else:
        done = round(width * min(100, max(0, int(percent))) / 100)
        bar = f"[{'#' * done}{'-' * (width - done)}] {int(percent):3d}%"
    left = ts.get("estimatedRemainingSeconds")
    if left is not None:
        bar += f"  about {duration(int(left))} left"
    bar += f"  (reported {age(ts.get('lastUpdatedTime'), now)} ago)"
    metrics = "  ".join(f"{m.get('name')}={m.get('value')}" for m in ts.get("metrics") or [])
    return f"{bar}\n{metrics}" if metrics else bar


def list_table(trainjobs: list[Dict], now: dt.datetime, all_namespaces: bool) -> str:
    header = ["NAME", "STATE", "WORKER", "PODS", "PROGRESS", "QUEUE", "AGE"]
    if all_namespaces:
        header.insert(0, "NAMESPACE")
    rows = []
    for tj in sorted(
        trainjobs, key=lambda t: (t["metadata"].get("namespace", ""), t["metadata"]["name"])
    ):
        meta = tj["metadata"]
        row = [
            meta["name"],
            state_of(tj),
            (tj.get("status") or {}).get("clusterName") or "-",
            pods_in_short(tj),
            progress_in_short(tj),
            (meta.get("labels") or {}).get(c.KUEUE_QUEUE_NAME_LABEL, "-"),
            age(meta.get("creationTimestamp"), now),
        ]
        if all_namespaces:
            row.insert(0, meta.get("namespace", ""))
        rows.append(row)
    return table(rows, header)


def _conditions(obj: Dict | None, now: dt.datetime) -> list[list[str]]:
    return [
        [
            x.get("type", ""),
            x.get("status", ""),
            x.get("reason", ""),
            age(x.get("lastTransitionTime"), now),
            x.get("message", ""),
        ]
        for x in ((obj or {}).get("status") or {}).get("conditions") or []
    ]


def _indent(text: str, by: str = "  ") -> str:
    return "\n".join(by + line if line else line for line in text.splitlines())


def _section(title: str, rows: list[list[str]], header: list[str]) -> str:
    if not rows:
        return f"{title}: none"
    return f"{title}:\n{_indent(table(rows, header))}"


def _events(events: list[Dict], now: dt.datetime) -> list[list[str]]:
    def when(e: Dict) -> str:
        return str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "")

    return [
        [
            e.get("type", ""),
            e.get("reason", ""),
            age(when(e) or None, now),
            (e.get("involvedObject") or {}).get("name", ""),
            e.get("message", ""),
        ]
        for e in sorted(events, key=when)[-15:]
    ]


def _progress_lines(tj: Dict, now: dt.datetime) -> list[str]:
    bar = progress_bar(tj, now)
    if bar is None:
        return ["Progress:    none reported"]
    first, *metrics = bar.splitlines()
    return [f"Progress:    {first}", *(f"Metrics:     {m}" for m in metrics)]


def describe(
    tj: Dict,
    workload: Dict | None,
    events: list[Dict],
    worker: WorkerView | None,
    now: dt.datetime,
) -> str:
    """The manager TrainJob with its Workload and Events, then what its worker shows."""
    meta, spec, status = tj["metadata"], tj.get("spec") or {}, tj.get("status") or {}
    lines = [
        f"Name:        {meta['name']}",
        f"Namespace:   {meta.get('namespace', '')}",
        f"State:       {state_of(tj)}",
        f"Worker:      {status.get('clusterName') or '-'}",
        f"Queue:       {(meta.get('labels') or {}).get(c.KUEUE_QUEUE_NAME_LABEL, '-')}",
        f"Runtime:     {(spec.get('runtimeRef') or {}).get('name', '-')}",
        f"Managed by:  {spec.get('managedBy') or c.MANAGED_BY_BUILTIN}",
        _section(
            "Conditions", _conditions(tj, now), ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"]
        ),
        *_progress_lines(tj, now),
        _section(
            "Pods by phase",
            [
                [p.get("name", ""), *(str(p.get(ph) or 0) for ph in PHASES)]
                for p in status.get("podsStatus") or []
            ],
            ["PODSET", *(ph.upper() for ph in PHASES)],
        ),
    ]
    if workload is not None:
        wstatus = workload.get("status") or {}
        checks = [
            [x.get("name", ""), x.get("state", ""), x.get("message", "")]
            for x in wstatus.get("admissionChecks") or []
        ]
        lines += [
            f"Workload:    {workload['metadata']['name']} (ClusterQueue "
            f"{(wstatus.get('admission') or {}).get('clusterQueue', '-')}, active "
            f"{(workload.get('spec') or {}).get('active', True)})",
            _indent(_section("Admission checks", checks, ["NAME", "STATE", "MESSAGE"])),
            _indent(
                _section(
                    "Conditions",
                    _conditions(workload, now),
                    ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
                )
            ),
        ]
    else:
        lines.append("Workload:    none")
    lines.append(
        _section("Events", _events(events, now), ["TYPE", "REASON", "AGE", "OBJECT", "MESSAGE"])
    )
    if worker is not None:
        lines.append(worker.render(now))
    return "\n".join(lines)


def _usage(usage: Dict | None) -> list[str]:
    """A pod's CPU and memory use as `kubectl top pod` writes them ("-" when not measured)."""
    if not usage:
        return ["-", "-"]
    return [f"{usage['cpuMillicores']}m", f"{-(-int(usage['memoryBytes']) // 2**20)}Mi"]


class WorkerView:
    """What the worker running a TrainJob shows: its copy, the pods, their Events; or why it
    could not be read."""

    def __init__(
        self,
        name: str,
        trainjob: Dict | None = None,
        pods: list[Dict] | None = None,
        events: list[Dict] | None = None,
        error: str | None = None,
    ) -> None:
        self.name, self.trainjob, self.error = name, trainjob, error
        self.pods, self.events = pods or [], events or []

    def render(self, now: dt.datetime) -> str:
        if self.error:
            return f"On worker {self.name}: {self.error}"
        if self.trainjob is None:
            return (
                f"On worker {self.name}: no TrainJob (not created yet, or removed after it ended)"
            )
        measured = any(p.get("usage") for p in self.pods)
        pods = [
            [
                p["metadata"]["name"],
                (p.get("status") or {}).get("phase", ""),
                (p.get("spec") or {}).get("nodeName") or "-",
                age(p["metadata"].get("creationTimestamp"), now),
                *(_usage(p.get("usage")) if measured else []),
            ]
            for p in sorted(self.pods, key=lambda p: p["metadata"]["name"])
        ]
        pod_columns = ["NAME", "PHASE", "NODE", "AGE", *(["CPU", "MEMORY"] if measured else [])]
        jobs = [
            [
                j.get("name", ""),
                *(str(j.get(k, 0)) for k in ("active", "ready", "succeeded", "failed")),
            ]
            for j in (self.trainjob.get("status") or {}).get("jobsStatus") or []
        ]
        parts = [
            f"On worker {self.name}:",
            _indent(
                _section(
                    "Conditions",
                    _conditions(self.trainjob, now),
                    ["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"],
                )
            ),
            _indent(_section("Jobs", jobs, ["NAME", "ACTIVE", "READY", "SUCCEEDED", "FAILED"])),
            _indent(_section("Pods", pods, pod_columns)),
            _indent(
                _section(
                    "Events",
                    _events(self.events, now),
                    ["TYPE", "REASON", "AGE", "OBJECT", "MESSAGE"],
                )
            ),
        ]
        return "\n".join(parts)
