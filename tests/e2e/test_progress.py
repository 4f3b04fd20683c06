"""Training progress as Kubeflow Trainer defines it, on the kwok bed: the worker controller
gives a TrainJob's trainer pods Trainer's three variables and a token for that TrainJob only,
takes their reports on its webhook port and writes status.trainerStatus, and the dispatcher
brings it back to the manager. kwok pods run no container, so the test reports for a pod
with a token the API server binds to that pod (what the kubelet would mount); a real pod
reports on real nodes (tests/real/test_real_nodes.py)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.waiting import wait_for
from kubectl_trainjob.__main__ import main as kubectl_trainjob
from tests.support.multikueue import MultiKueue
from tests.support.reporting import (
    Reporter,
    progress_interval,
    report,
    reporting,
    token_for,
    trainer_status,
    worker_replica,
)
from trainjob import progress

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
Dict = dict[str, Any]


def test_trainer_pods_report_progress_that_reaches_the_manager(
    bed: Bed,
    controllers: list[setup.Controller],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    mk = MultiKueue(bed)
    mk.submit("reporting", nodes=2, run="300s")
    worker = mk.started_on("reporting")
    api = bed.api(worker)
    pod = wait_for(lambda: (mk.pods(worker, "reporting") or [None])[0], 60, what="a pod")

    # What the pod was given: Trainer's variables, a token for this TrainJob, our CA.
    (container,) = pod.spec.containers
    env = {e.name: e.value for e in container.env or []}
    path = progress.status_path(mk.ns, "reporting")
    assert env[progress.ENV_URL].endswith(path), env
    assert env[progress.ENV_TOKEN] == f"{progress.MOUNT_PATH}/token"
    (volume,) = [v for v in pod.spec.volumes if v.name == progress.VOLUME]
    projected = volume.projected.sources[0].service_account_token
    assert projected.audience == progress.audience(mk.ns, "reporting")
    made = client.CoreV1Api(api).read_namespaced_config_map("reporting-tls-config", mk.ns)
    assert made.metadata.owner_references[0].name == "reporting"
    reporter = Reporter(worker_replica(controllers, worker), made.data["ca.crt"])

    token = token_for(api, mk.ns, progress.audience(mk.ns, "reporting"), pod)
    # a second metric a hostile script might send: an OSC 52 clipboard write and a clear
    metrics = [
        {"name": "loss", "value": "0.25"},
        {"name": "\x1b]52;c;eA==\x07", "value": "\x1b[2J"},
    ]
    code, said = reporter.post(
        path, report(45, estimatedRemainingSeconds=90, metrics=metrics), token
    )
    assert code == 200, said
    assert said["trainerStatus"]["progressPercentage"] == 45

    def on_manager() -> Dict | None:
        found = trainer_status(mk, "reporting")
        return found if found.get("progressPercentage") == 45 else None

    brought = wait_for(on_manager, 30, what="the progress on the manager's TrainJob")
    assert brought["estimatedRemainingSeconds"] == 90 and brought["metrics"] == metrics
    assert brought == trainer_status(mk, "reporting", worker)
    plugin = ["--kubeconfig", str(bed.kubeconfig(mk.manager)), "-n", mk.ns]
    assert kubectl_trainjob([*plugin, "progress", "reporting"]) == 0
    shown = capsys.readouterr().out
    assert "]  45%  about 1m30s left" in shown and "loss=0.25" in shown, shown
    assert "^[]52;c;eA==\\x07=^[[2J" in shown and "\x1b" not in shown, shown  # as kubectl

    # The Kubeflow SDK's own reporter (kubeflow 0.5), as a training script calls it, with
    # the variables the pod has, pointed at this replica; the report replaces the last one.
    time.sleep(progress_interval() + 0.5)  # its turn: the SDK answers False to anything but 200
    (tmp_path / "token").write_text(token)
    (tmp_path / "ca.crt").write_text(made.data["ca.crt"])
    sdk = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from kubeflow.trainer import update_trainjob_status as u; "
            "sys.exit(0 if u(progress_percent=60, metrics={'loss': 0.2}) else 1)",
        ],
        env={
            **os.environ,
            progress.ENV_URL: reporter.base + path,
            progress.ENV_CA_CERT: str(tmp_path / "ca.crt"),
            progress.ENV_TOKEN: str(tmp_path / "token"),
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sdk.returncode == 0, sdk.stderr
    wait_for(
        lambda: trainer_status(mk, "reporting").get("progressPercentage") == 60,
        30,
        what="the SDK's report on the manager",
    )
    assert "estimatedRemainingSeconds" not in trainer_status(mk, "reporting")
    assert trainer_status(mk, "reporting")["metrics"] == [{"name": "loss", "value": "0.2"}]


def test_a_chatty_pod_costs_one_write_per_interval_and_its_last_report_is_kept(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    run = reporting(mk, controllers, "chatty")
    api, reporter, token, path = run.api, run.reporter, run.token, run.path

    seen: list[int] = []
    stop, watching = threading.Event(), threading.Event()

    def watch_worker() -> None:
        try:
            follow_worker()
        except Exception:
            if not stop.is_set():  # a stopped watch may end mid-response
                raise

    def follow_worker() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            client.CustomObjectsApi(api).list_namespaced_custom_object,
            "trainer.kubeflow.org",
            "v1alpha1",
            mk.ns,
            "trainjobs",
            field_selector="metadata.name=chatty",
            timeout_seconds=30,
        ):
            watching.set()  # the TrainJob as it is now: the watch is under way
            found = ((event["object"].get("status") or {}).get("trainerStatus") or {}).get(
                "progressPercentage"
            )
            if found is not None and (not seen or seen[-1] != found):
                seen.append(found)
            if stop.is_set():
                stream.stop()

    watcher = threading.Thread(target=watch_worker, daemon=True)
    watcher.start()
    assert watching.wait(30), "the watch of the worker's TrainJob never started"
    started = time.monotonic()
    for percent in range(1, 11):  # ten reports in well under one interval
        code, said = reporter.post(path, report(percent), token)
        assert code == 200, said
    sent = time.monotonic() - started
    wait_for(lambda: seen and seen[-1] == 10, 30, what="the last report on the worker")
    stop.set()
    # the first report at once, the last at its turn, and at most one write for each interval
    # the reports took in between: sent within one interval (as here, unless the machine
    # crawls), that is [1, 10]; the bound holds however long they took
    assert seen[0] == 1 and seen[-1] == 10 and seen == sorted(seen), seen
    assert len(seen) <= 2 + int(sent // progress_interval()), (seen, sent)
    wait_for(
        lambda: trainer_status(mk, "chatty").get("progressPercentage") == 10,
        30,
        what="the last report on the manager",
    )


def test_a_report_is_refused_naming_why(bed: Bed, controllers: list[setup.Controller]) -> None:
    mk = MultiKueue(bed)
    run = reporting(mk, controllers, "guarded")
    worker, api, reporter, path, good = run.worker, run.api, run.reporter, run.path, run.token

    code, said = reporter.post(path, report(1), None)
    assert (code, "bearer token is required" in said["message"]) == (401, True), said
    code, said = reporter.post(path, report(1), "not-a-token")
    assert (code, "not a JWT" in said["message"]) == (401, True), said
    # another TrainJob's token (one a pod of `other` would have)
    other = token_for(api, mk.ns, progress.audience(mk.ns, "other"))
    code, said = reporter.post(path, report(1), other)
    assert code == 403 and f"not for TrainJob {mk.ns}/guarded" in said["message"], said
    # a token of this TrainJob's audience, of a ServiceAccount of another namespace
    stranger = token_for(api, "default", progress.audience(mk.ns, "guarded"))
    code, said = reporter.post(path, report(1), stranger)
    assert code == 403 and "system:serviceaccount:default:default" in said["message"], said
    # signed by no one the API server knows: its TokenReview says not authenticated
    head, claims, _ = good.split(".")
    code, said = reporter.post(path, report(1), f"{head}.{claims}.forged")
    assert (code, "not valid" in said["message"]) == (401, True), said
    # a TrainJob that does not exist, with a token for it
    ghost = token_for(api, mk.ns, progress.audience(mk.ns, "ghost"))
    code, said = reporter.post(progress.status_path(mk.ns, "ghost"), report(1), ghost)
    assert code == 404 and "ghost" in said["message"], said
    # the payload: not JSON, a field out of Trainer's schema, too big
    code, said = reporter.post(path, b"{nope", good)
    assert code == 400, said
    code, said = reporter.post(path, report(101), good)
    assert code == 422 and "trainerStatus.progressPercentage" in said["message"], said
    code, said = reporter.post(path, b" " * (progress.MAX_REPORT_BYTES + 1), good)
    assert code == 413, said
    assert trainer_status(mk, "guarded", worker) == {}  # nothing was written


def test_a_forged_token_flood_costs_no_review_and_a_real_report_is_taken(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    """Before: each forged token cost a TokenReview from one shared budget (20 a second, 40
    at once), so a pod sending forged tokens left every real pod's new token 429."""
    mk = MultiKueue(bed)
    run = reporting(mk, controllers, "flooded")
    head, claims, _ = run.token.split(".")
    said_claims = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))

    def forge(i: int) -> str:  # the real claims (they pass every check made without a key)
        body = json.dumps({**said_claims, "jti": f"forged-{i}"}).encode()
        return f"{head}.{base64.urlsafe_b64encode(body).decode().rstrip('=')}.{'A' * 342}"

    refused = [run.reporter.post(run.path, report(1), forge(i)) for i in range(120)]
    assert {code for code, _ in refused} == {401}, refused[:3]
    assert all("Signature verification failed" in said["message"] for _, said in refused), refused[
        :3
    ]
    fresh = token_for(run.api, mk.ns, progress.audience(mk.ns, "flooded"), run.pod)
    code, said = run.reporter.post(run.path, report(30), fresh)
    assert code == 200, said
