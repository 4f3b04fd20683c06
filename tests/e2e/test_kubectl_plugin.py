"""`kubectl trainjob` (plugin/kubectl_trainjob/) against the bed: list, describe and logs of a
TrainJob running on a worker, reached through the manager's kubeconfig Secret or the user's own
context, and what it says when the worker cannot be reached."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters.bed import Bed
from clusters.builds import binary
from clusters.helpers.waiting import wait_for
from kubecontrol.version import VERSION
from kubectl_trainjob.__main__ import main
from tests.support.multikueue import MultiKueue, pod_phases

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]


def plugin(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, *argv: str
) -> tuple[int, str, str]:
    code = main(["--kubeconfig", str(kubeconfig), *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_describe_and_logs_of_a_trainjob_running_on_a_worker(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    mk = MultiKueue(bed)
    mk.submit("viewed", nodes=2, run="120s")
    worker = mk.started_on("viewed")
    kubeconfig = bed.kubeconfig(mk.manager)  # the admin's: workers through their Secrets

    wait_for(
        lambda: pod_phases(mk.get("viewed")) == {"node": (0, 2, 0, 0)},
        30,
        what="the pods' count on the manager TrainJob",
    )
    code, out, _ = plugin(capsys, kubeconfig, "-n", mk.ns, "list")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split() == ["NAME", "STATE", "WORKER", "PODS", "PROGRESS", "QUEUE", "AGE"]
    assert row.split()[:7] == ["viewed", "Running", worker, "2", "running", "-", "q"]

    code, out, _ = plugin(capsys, kubeconfig, "list", "-A")
    assert code == 0 and any(
        line.split()[:3] == [mk.ns, "viewed", "Running"] for line in out.splitlines()
    )

    code, direct, _ = plugin(capsys, kubeconfig, "-n", mk.ns, "describe", "viewed", "--direct")
    assert code == 0, direct
    code, out, _ = plugin(capsys, kubeconfig, "-n", mk.ns, "describe", "viewed")
    assert code == 0, out
    # the same worker section, read through the manager or from the worker itself (ages
    # aside: the two reads are a moment apart)

    def worker_section(text: str) -> str:
        section = text.split("On worker")[1].split("Events:")[0]
        return re.sub(r"(?<=\s)\d+[smhd](?=\s)", "AGE", section)

    assert worker_section(out) == worker_section(direct)
    assert f"Worker:      {worker}" in out
    assert f'multikueue   Ready   The workload was admitted on "{worker}"' in out
    assert f"dispatched to cluster {worker}" in out  # the manager's Started Event
    by_phase = out.split("Pods by phase:", 1)[1].splitlines()[2]  # status.podsStatus
    assert by_phase.split() == ["node", "0", "2", "0", "0", "0"]
    on_worker = out.split(f"On worker {worker}:", 1)[1]
    for pod in mk.pods(worker, "viewed"):
        assert f"{pod.metadata.name}   Running" in on_worker
    jobs = on_worker.split("Jobs:", 1)[1].split("Pods:", 1)[0]
    assert any(line.split()[:1] == ["node"] for line in jobs.splitlines())  # jobsStatus

    # kwok's pods run no containers: the API has no log for them, and the plugin says which
    # pod on which worker, in the API's words: through the manager's view.trainjob.dev API,
    # or, with --direct, from the worker itself (here through the MultiKueueCluster's Secret).
    pod = next(
        p.metadata.name
        for p in mk.pods(worker, "viewed")
        if p.metadata.labels.get("batch.kubernetes.io/job-completion-index") == "1"
    )
    code, out, err = plugin(capsys, kubeconfig, "-n", mk.ns, "logs", "viewed", "--node", "1")
    assert code == 1
    assert err.startswith("error: cannot read the logs of TrainJob viewed: "), err
    assert f"worker {worker}, pod {pod}: " in err, err
    code, out, err = plugin(
        capsys, kubeconfig, "-n", mk.ns, "logs", "viewed", "--node", "1", "--direct"
    )
    assert code == 1
    assert err.startswith(f"error: cannot read the logs of pod {pod} on {worker}: "), err

    code, _, err = plugin(capsys, kubeconfig, "-n", mk.ns, "logs", "viewed", "--node", "7")
    assert code == 1 and "no pod of replicated job 'node' with index 7" in err, err
    code, _, err = plugin(
        capsys, kubeconfig, "-n", mk.ns, "logs", "viewed", "--node", "7", "--direct"
    )
    assert code == 1 and "no pod of TrainJob viewed" in err and "job-completion-index=7" in err

    code, _, err = plugin(capsys, kubeconfig, "-n", mk.ns, "describe", "nothing")
    assert (code, err) == (1, f'error: TrainJob "nothing" not found in namespace "{mk.ns}"\n')


def with_worker_contexts(bed: Bed, tmp_path: Path, servers: dict[str, str]) -> Path:
    """The admin's manager kubeconfig plus one context per worker, named after it, pointing at
    `servers[worker]` (or the worker's own API server)."""
    merged: dict[str, Any] = yaml.safe_load(bed.kubeconfig(bed.config.managers[0].name).read_text())
    for w in bed.config.workers:
        own = yaml.safe_load(bed.kubeconfig(w.name).read_text())
        cluster = dict(own["clusters"][0]["cluster"])
        cluster["server"] = servers.get(w.name, cluster["server"])
        merged["clusters"].append({"name": w.name, "cluster": cluster})
        merged["users"].append({"name": f"{w.name}-user", "user": own["users"][0]["user"]})
        merged["contexts"].append(
            {"name": w.name, "context": {"cluster": w.name, "user": f"{w.name}-user"}}
        )
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(merged))
    return path


def test_a_context_named_after_the_worker_is_used_and_an_unreachable_worker_is_said(
    bed: Bed, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mk = MultiKueue(bed)
    mk.submit("reached", run="120s")
    worker = mk.started_on("reached")
    good = with_worker_contexts(bed, tmp_path, {})
    code, out, _ = plugin(capsys, good, "-n", mk.ns, "describe", "reached", "--direct")
    assert code == 0 and f"On worker {worker}:" in out and "Running" in out.split("Pods:")[1]

    (tmp_path / "bad").mkdir()
    closed = with_worker_contexts(bed, tmp_path / "bad", {worker: "https://127.0.0.1:9"})
    code, out, _ = plugin(capsys, closed, "-n", mk.ns, "describe", "reached", "--direct")
    assert code == 0, "the manager's side is still shown"
    assert f"On worker {worker}: unreachable: " in out
    code, _, err = plugin(capsys, closed, "-n", mk.ns, "logs", "reached", "--direct")
    assert code == 1 and err.startswith(f"error: cannot list pods on {worker}: "), err


def test_kubectl_finds_the_plugin_on_path(bed: Bed) -> None:
    """Installed as the console script `kubectl-trainjob` beside the interpreter."""
    script = Path(sys.executable).parent / "kubectl-trainjob"
    kubectl = binary("kubectl")  # the bed's own, built from k8s.io/kubernetes
    assert script.exists(), "pip install -e . puts kubectl-trainjob in the venv"
    env = {"PATH": f"{script.parent}:/usr/bin:/bin"}
    done = subprocess.run(
        [str(kubectl), "trainjob", "list", "-A", "--kubeconfig", str(bed.kubeconfig("manager"))],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]


def test_output_formats_log_flags_a_watched_progress_version_and_completion(
    bed: Bed, capsys: pytest.CaptureFixture[str]
) -> None:
    mk = MultiKueue(bed)
    mk.submit("shown", run="120s")
    worker = mk.started_on("shown")
    kubeconfig = bed.kubeconfig(mk.manager)
    ns = ["-n", mk.ns]

    code, out, _ = plugin(capsys, kubeconfig, *ns, "list", "-o", "json")
    listed = json.loads(out)
    assert code == 0 and listed["kind"] == "List"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["shown"]
    assert listed["items"][0]["status"]["clusterName"] == worker
    code, out, _ = plugin(capsys, kubeconfig, *ns, "list", "-o", "yaml")
    assert yaml.safe_load(out)["items"][0]["metadata"]["name"] == "shown"

    # The story, as the manager's view.trainjob.dev API serves it.
    code, out, _ = plugin(capsys, kubeconfig, *ns, "describe", "shown", "-o", "json")
    story = json.loads(out)
    assert (code, story["kind"], story["worker"]) == (0, "TrainJobStory", worker)
    assert len(story["pods"]) == 1 and story["copy"] is not None
    # Without it (--direct): what was read, the Workload and the Events selected by name.
    code, out, _ = plugin(capsys, kubeconfig, *ns, "describe", "shown", "-o", "yaml", "--direct")
    read = yaml.safe_load(out)
    uid = read["trainJob"]["metadata"]["uid"]
    assert [o["uid"] for o in read["workload"]["metadata"]["ownerReferences"]] == [uid]
    assert "Started" in [e["reason"] for e in read["events"]]
    assert read["worker"]["name"] == worker and len(read["worker"]["pods"]) == 1

    # The log flags reach the pod asked for (kwok's pods have no log: the API says so, about it).
    (pod,) = [p.metadata.name for p in mk.pods(worker, "shown")]
    flags = ["--pod", pod, "--since", "1h30m", "--timestamps", "--tail", "5"]
    code, _, err = plugin(capsys, kubeconfig, *ns, "logs", "shown", *flags)
    assert code == 1 and f"worker {worker}, pod {pod}: " in err, err
    code, _, err = plugin(capsys, kubeconfig, *ns, "logs", "shown", *flags, "-p", "--direct")
    assert code == 1 and f"cannot read the logs of pod {pod} on {worker}: " in err, err
    code, _, err = plugin(capsys, kubeconfig, *ns, "logs", "shown", "--pod", "elsewhere")
    assert code == 1 and "'elsewhere' is not one of this TrainJob's pods" in err, err

    # progress -w: a line per change, from a watch of the one TrainJob, until it ends.
    mk.submit("watched", run="5s")
    code, out, _ = plugin(capsys, kubeconfig, *ns, "progress", "watched", "-w", "-o", "json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and lines[-1]["state"] == "Complete", lines
    assert len(lines) == len({line["state"] for line in lines}), "a line per change only"

    with pytest.raises(SystemExit) as done:  # as argparse's --version ends
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"kubectl-trainjob {VERSION}\n"
    code, out, _ = plugin(capsys, kubeconfig, "completion", "bash")
    assert (
        code == 0 and "complete -o bashdefault -F _shtab_kubectl_trainjob kubectl-trainjob" in out
    )
    assert subprocess.run(["bash", "-n"], input=out, text=True).returncode == 0
