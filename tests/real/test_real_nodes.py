"""On real nodes: the product as Pods from its image, failover of the dispatcher through its
Service, and TrainJobs that really run (torchrun across two pods, a failing pod)."""

from __future__ import annotations

import base64
import contextlib
import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from playwright.sync_api import expect

from clusters import chart, images, nodes
from clusters.bed import Bed
from clusters.config import REPO_ROOT
from clusters.helpers.browser import page_of, screenshot, view_server
from clusters.helpers.examples import DDP_FILE, MPI_FILE, MPI_RUNTIME_FILE, RUNTIME_FILE
from clusters.helpers.kube import TrainJobs, api_error
from clusters.helpers.tenant import Tenant, story_path
from clusters.helpers.waiting import wait_for
from clusters.install import DISPATCHER
from clusters.kube import Applier, load_manifests
from dispatcher.decisions import checkpoints
from trainjob_api.views import TrainJobView

pytestmark = [pytest.mark.realnodes, pytest.mark.timeout(900)]
Dict = dict[str, Any]
NAMESPACE = "trainjob-system"
SDK_EXAMPLE = REPO_ROOT / "examples" / "sdk_train.py"
LOSS = re.compile(r"^step (\d+)/(\d+) loss ([0-9.]+)$", re.M)


def _manager(bed: Bed) -> str:
    return bed.config.managers[0].name


def _trainjob(name: str, example: Path = DDP_FILE, **trainer: Any) -> Dict:
    """The example's TrainJob as `name`, on the LocalQueue `q` setup.install makes (the
    examples name the runbook's `user-queue`)."""
    tj = next(d for d in load_manifests(example.read_text()) if d["kind"] == "TrainJob")
    tj["metadata"]["name"] = name
    tj["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "q"
    tj["spec"]["trainer"].update(trainer)
    return tj


def _winner(bed: Bed, namespace: str, name: str) -> str:
    """The worker that holds the TrainJob's copy (exactly one, or the test fails)."""
    holders = []
    for w in bed.config.workers:
        try:
            TrainJobs(bed.api(w.name), namespace).get(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
            continue
        holders.append(w.name)
    assert len(holders) <= 1, f"{name} runs on {holders}"
    return holders[0] if holders else ""


def _plugin(
    bed: Bed, *args: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl trainjob` with the admin's kubeconfig of the manager, or `kubeconfig`."""
    kubeconfig = kubeconfig or bed.kubeconfig(_manager(bed))
    return subprocess.run(
        [str(Path(sys.executable).parent / "kubectl-trainjob"), *args],
        env={"KUBECONFIG": str(kubeconfig), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _usage(tenant: Tenant, namespace: str, name: str) -> list[Dict]:
    """The running pods' CPU and memory in the story, once every running pod has them."""
    code, story = tenant.get(story_path(namespace, name))
    assert code == 200, story
    running = [p for p in story["pods"] if p["phase"] == "Running"]
    assert story["usageProblem"] is None, story["usageProblem"]
    if not running or not all(p["usage"] for p in running):
        return []
    return [p["usage"] for p in running]


def test_product_runs_as_pods_from_its_image(installed: Bed) -> None:
    for c in installed.config.clusters:
        pods = client.CoreV1Api(installed.api(c.name)).list_namespaced_pod(NAMESPACE).items
        assert pods, f"no product pods on {c.name}"
        for pod in pods:
            (status,) = pod.status.container_statuses
            assert status.ready, f"{c.name}/{pod.metadata.name} not ready: {status.state}"
            assert status.image == images.PRODUCT.name
            assert pod.spec.node_name == f"{c.name}-real"
    manager = _manager(installed)
    dispatchers = client.AppsV1Api(installed.api(manager)).read_namespaced_deployment(
        DISPATCHER, NAMESPACE
    )
    assert dispatchers.status.ready_replicas == 2


def test_ddp_training_across_clusters(installed: Bed, real_namespace: str, tmp_path: Path) -> None:
    """examples/torch-ddp-cpu.yaml on the manager, submitted by a tenant with the built-in
    `edit` role in its namespace there and nothing else: 2 pods on one worker rendezvous over
    the headless Service's names, train, exit 0; Complete on the worker and the manager; the
    tenant reads the loss lines with `kubectl trainjob logs` and the pods in the story, through
    the manager's view.trainjob.dev API (no worker credential, no Secret), and the progress
    rank 0 reports on the TrainJob (`kubectl trainjob progress`), midway and at 100%; in the
    web view (`kubectl trainjob ui`, headless Chromium) the log pane follows the lines live."""
    name = f"ddp-{uuid.uuid4().hex[:6]}"
    alice = Tenant(installed, real_namespace, "alice", "edit", tmp_path)
    on_manager = TrainJobs(alice.api, real_namespace)
    created = time.monotonic()
    # steps of 1.5 s: about a minute of training, for metrics-server to measure the pods
    slower = [{"name": "TRAIN_STEPS", "value": "40"}, {"name": "STEP_SECONDS", "value": "1.5"}]
    on_manager.create(_trainjob(name, env=slower))

    def loss_lines() -> list[tuple[int, float]]:
        out = _plugin(installed, "logs", name, "-n", real_namespace, kubeconfig=alice.kubeconfig)
        return [(int(m[1]), float(m[3])) for m in LOSS.finditer(out.stdout)]

    # The web view, as alice runs it: the log pane follows the pod's lines as they are written.
    view = view_server(alice.kubeconfig, "--namespaces", real_namespace)
    with view as url, page_of(f"{url}#/trainjobs/{real_namespace}/{name}") as page:
        pane = page.locator("#log")
        expect(pane).to_contain_text(re.compile(r"step \d+/40 loss"), timeout=300_000)
        first_loss = time.monotonic() - created
        # the page keeps up: what the worker's log holds now shows in it within seconds
        latest = max(step for step, _ in wait_for(loss_lines, 30, what="loss lines"))
        expect(pane).to_contain_text(f"step {latest}/40 loss", timeout=5_000)
        expect(page.locator("#log-state")).to_contain_text(re.compile("following|ended"))
        screenshot(page, "trainjob-logs")
        # the pods' CPU and memory, from the worker's metrics API (metrics-server)
        used = wait_for(lambda: _usage(alice, real_namespace, name), 90, what="pods' usage")
        assert all(u["cpuMillicores"] > 0 and u["memoryBytes"] > 2**20 for u in used), used
        took = []
        for _ in range(10):
            began = time.monotonic()
            alice.get(story_path(real_namespace, name))
            took.append(time.monotonic() - began)
        median, most = sorted(took)[5] * 1000, max(took) * 1000
        print(f"\n[figure] a story read with the pods' usage: {median:.0f} ms median, "
              f"{most:.0f} ms max (10 reads)")  # fmt: skip
        expect(page.locator("#pods-usage")).to_contain_text("metrics API measured", timeout=10_000)
        expect(page.locator("#pods th", has_text="Memory")).to_be_visible()
        screenshot(page, "trainjob-pods-usage")
    code, story = alice.get(story_path(real_namespace, name))
    assert code == 200, story
    assert {p["replicatedJob"] for p in story["pods"]} == {"node"}, story
    assert len(story["pods"]) == 2 and story["worker"], story
    code, _ = alice.get(f"/api/v1/namespaces/{NAMESPACE}/secrets")
    assert code == 403, "the tenant reads no Secret"

    def reported() -> Dict:
        return dict((on_manager.get(name).get("status") or {}).get("trainerStatus") or {})

    # rank 0 reports its progress (Trainer's TrainJobStatus, raw HTTPS) to its worker's
    # controller; the dispatcher brings it back: seen on the manager while it runs
    midway = wait_for(
        lambda: (r := reported()) and 0 < r.get("progressPercentage", 0) < 100 and r,
        120,
        what=f"progress of {name} on the manager while it runs",
    )
    assert midway["metrics"][0]["name"] == "loss", midway
    shown = _plugin(installed, "progress", name, "-n", real_namespace, kubeconfig=alice.kubeconfig)
    assert "%  about" in shown.stdout, shown
    on_manager.wait_condition(name, "Complete", timeout=300)
    worker = _winner(installed, real_namespace, name)
    assert worker
    on_worker = TrainJobs(installed.api(worker), real_namespace)
    assert on_worker.condition(name, "Complete")["status"] == "True"
    pods = on_worker.pods(name)
    assert len(pods) == 2
    for pod in pods:
        assert pod.status.phase == "Succeeded", pod.status
        (status,) = pod.status.container_statuses
        assert status.state.terminated.exit_code == 0
        # The bed's training image, which the node also holds under the public name the
        # example names (the kubelet reports either).
        assert status.image in images.names_of(images.TRAINING)
    lines = loss_lines()
    steps = [s for s, _ in lines]
    assert steps == list(range(1, 41)), steps
    assert lines[-1][1] < lines[0][1], lines
    final = wait_for(
        lambda: (r := reported()).get("progressPercentage") == 100 and r, 30, what="100%"
    )
    assert final["estimatedRemainingSeconds"] == 0
    assert final["metrics"] == [{"name": "loss", "value": f"{lines[-1][1]:.4f}"}], final
    print(f"\n[figure] create -> first loss line on the manager's side: {first_loss:.1f}s")


def test_mpi_training_runs_mpirun_across_two_pods(installed: Bed, real_namespace: str) -> None:
    """examples/mpi-cpu.yaml on the runtime of examples/runtimes/mpi-cpu.yaml as written (its
    public image, which the node holds under that name) on the manager: the launcher's
    mpirun, as mpiuser, reaches both node pods' sshd on port 2222 with the hostfile and key
    pair the worker controller made, one rank on each; the ranks train together (Allreduce)
    and the loss falls; Complete on the worker and the manager."""
    manager = _manager(installed)
    (runtime,) = load_manifests(MPI_RUNTIME_FILE.read_text())
    for c in installed.config.clusters:
        custom = client.CustomObjectsApi(installed.api(c.name))
        try:
            custom.create_cluster_custom_object(
                "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", runtime
            )
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    name = f"mpi-{uuid.uuid4().hex[:6]}"
    on_manager = TrainJobs(installed.api(manager), real_namespace)
    on_manager.create(_trainjob(name, MPI_FILE))
    done = on_manager.wait_condition(name, "Complete", timeout=300)
    worker = _winner(installed, real_namespace, name)
    on_worker = TrainJobs(installed.api(worker), real_namespace)
    core = client.CoreV1Api(installed.api(worker))
    (launcher,) = [
        p
        for p in on_worker.pods(name)
        if p.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "launcher"
    ]
    assert launcher.status.phase == "Succeeded", launcher.status
    log = core.read_namespaced_pod_log(launcher.metadata.name, real_namespace)
    print(f"\n[figure] MPI launcher: {log.splitlines()[0]} ... {log.splitlines()[-1]}")
    assert f"ranks 2 on {name}-node-0-0" in log and f"{name}-node-0-1" in log, log
    losses = [float(m[3]) for m in LOSS.finditer(log)]
    assert len(losses) == 30 and losses[-1] < losses[0], log
    assert done["reason"] == "AllJobsCompleted"
    # The hostfile names the node pods by the headless Service; the keys are the TrainJob's.
    hostfile = core.read_namespaced_config_map(f"{name}-mpi-hostfile", real_namespace)
    assert hostfile.data["hostfile"] == (
        f"{name}-node-0-0.{name} slots=1\n{name}-node-0-1.{name} slots=1\n"
    )


def test_a_failing_pod_fails_the_trainjob_on_the_manager(
    installed: Bed, real_namespace: str
) -> None:
    """With a runtime whose Jobs do not retry (backoffLimit 0), as a user who wants to know
    at once: Failed on the manager with the reason and message from the worker."""
    manager = _manager(installed)
    name = f"fail-{uuid.uuid4().hex[:6]}"
    on_manager = TrainJobs(installed.api(manager), real_namespace)
    runtime = next(
        d
        for d in images.for_the_bed(load_manifests(RUNTIME_FILE.read_text()))
        if d["kind"] != "TrainJob"
    )
    runtime["metadata"]["name"] = "no-retries"
    job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    for c in installed.config.clusters:
        TrainJobs(installed.api(c.name), real_namespace).create_runtime(runtime)
    script = "import sys; print('bad input file', flush=True); sys.exit(1)"
    tj = _trainjob(name, numNodes=1, command=["python3", "-c", script])
    tj["spec"]["runtimeRef"] = {"name": "no-retries", "kind": "TrainingRuntime"}
    on_manager.create(tj)
    failed = on_manager.wait_condition(name, "Failed", timeout=240)
    print(f"\n[figure] Failed on the manager: {failed['reason']}: {failed['message']}")
    assert failed["reason"] == "FailedJobs", failed
    # The Job's reason, then the pod's own words: exit code and its last log lines.
    assert "BackoffLimitExceeded" in failed["message"], failed
    assert "container node exited with code 1 (Error): bad input file" in failed["message"]
    # The worker's Event comes back through its own watch, on its own time.
    wait_for(
        lambda: any(reason == "FailedJobs" for reason, _ in on_manager.events(name)),
        30,
        what="the worker's FailedJobs Event on the manager TrainJob",
    )
    worker = _winner(installed, real_namespace, name)
    pods = TrainJobs(installed.api(worker), real_namespace).pods(name)
    assert pods and all(p.status.phase == "Failed" for p in pods)
    assert {s.state.terminated.exit_code for p in pods for s in p.status.container_statuses} == {1}


DEPENDENCIES_ACCESS = REPO_ROOT / "deploy/worker/with-dependencies/dependencies-rbac.yaml"


def test_a_jobs_secret_and_config_map_reach_its_pod_on_the_worker(
    installed: Bed, real_namespace: str
) -> None:
    """In a namespace its admin opted in (trainjob.dev/copy-dependencies=true), a job whose
    trainer reads a token from a Secret and a setting from a ConfigMap of the manager: both
    copied to the worker that admits it before its pod starts; the pod reads them and exits 0
    (it exits 3 when either is wrong); Complete on the manager."""
    manager = _manager(installed)
    core = client.CoreV1Api(installed.api(manager))
    core.patch_namespace(
        real_namespace, {"metadata": {"labels": {"trainjob.dev/copy-dependencies": "true"}}}
    )
    token = {"token": base64.b64encode(b"s3cr3t").decode()}
    core.create_namespaced_secret(real_namespace, {"metadata": {"name": "hf-token"}, "data": token})
    core.create_namespaced_config_map(
        real_namespace, {"metadata": {"name": "train-config"}, "data": {"lr": "0.1"}}
    )
    access = load_manifests(DEPENDENCIES_ACCESS.read_text())
    for worker in installed.config.workers:
        Applier(installed.api(worker.name)).apply_all(access)
    try:
        name = f"deps-{uuid.uuid4().hex[:6]}"
        script = (
            "import os, sys; token, lr = os.environ.get('TOKEN'), os.environ.get('LR'); "
            "print('token', 'ok' if token == 's3cr3t' else 'WRONG', 'lr', lr, flush=True); "
            "sys.exit(0 if token == 's3cr3t' and lr == '0.1' else 3)"
        )
        env = [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}},
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "train-config", "key": "lr"}}},
        ]
        on_manager = TrainJobs(installed.api(manager), real_namespace)
        on_manager.create(_trainjob(name, numNodes=1, command=["python3", "-c", script], env=env))
        on_manager.wait_condition(name, "Complete", timeout=240)
        worker = _winner(installed, real_namespace, name)
        pods = TrainJobs(installed.api(worker), real_namespace).pods(name)
        logs = client.CoreV1Api(installed.api(worker)).read_namespaced_pod_log(
            pods[0].metadata.name, real_namespace
        )
        print(f"\n[figure] the pod on {worker} said: {logs.strip()}")
        assert "token ok lr 0.1" in logs, logs
    finally:
        for worker in installed.config.workers:
            Applier(installed.api(worker.name)).delete_all(access)


def _lease_holder(bed: Bed) -> str:
    lease = client.CoordinationV1Api(bed.api(_manager(bed))).read_namespaced_lease(
        DISPATCHER, NAMESPACE
    )
    return str(lease.spec.holder_identity or "")


def test_dispatcher_failover_keeps_creates_working(installed: Bed, real_namespace: str) -> None:
    """While TrainJobs are created steadily on the manager: SIGKILL the leading dispatcher's
    container (the kubelet restarts it; with its pod's name as its identity it leads again at
    once), then delete the leading pod (the standby takes the Lease). Creates keep working
    through the webhook Service throughout, and every TrainJob runs once, on one worker."""
    bed = installed
    manager = _manager(bed)
    core = client.CoreV1Api(bed.api(manager))
    on_manager = TrainJobs(bed.api(manager), real_namespace)
    names: list[str] = []
    refused: list[str] = []
    broke: list[BaseException] = []  # what stopped the creator early, if anything did
    stop = threading.Event()

    def create_steadily() -> None:
        try:
            creating()
        except BaseException as exc:
            broke.append(exc)

    def creating() -> None:
        i = 0
        while not stop.is_set():
            name = f"fo-{i:03d}"
            deadline = time.monotonic() + 5  # a retry of a few seconds, as a client would
            while True:
                try:
                    on_manager.create(
                        _trainjob(name, numNodes=1, command=["python3", "-c", "print('ok')"])
                    )
                    names.append(name)
                    break
                except client.ApiException as exc:
                    if time.monotonic() > deadline:
                        refused.append(f"{name}: {api_error(exc)}")
                        break
                    time.sleep(0.5)
            i += 1
            stop.wait(1.0)

    creator = threading.Thread(target=create_steadily, daemon=True)
    creator.start()
    try:
        time.sleep(3)
        # 1. The leader's container killed: the kubelet restarts it.
        leader = wait_for(lambda: _lease_holder(bed), 60, what="a dispatcher leader")
        status = core.read_namespaced_pod(leader, NAMESPACE).status.container_statuses[0]
        node = bed.node(manager)
        assert node is not None
        nodes.ctr(node, "tasks", "kill", "--signal", "SIGKILL", status.container_id.split("://")[1])
        killed = time.monotonic()

        def restarted() -> bool:
            now = core.read_namespaced_pod(leader, NAMESPACE).status.container_statuses[0]
            return bool(now.restart_count > status.restart_count and now.ready)

        wait_for(restarted, 120, what=f"the kubelet to restart {leader}'s container")
        back = time.monotonic() - killed
        wait_for(lambda: _lease_holder(bed), 60, what="a leader after the restart")
        # 2. The leading pod deleted: the standby takes over.
        leader = _lease_holder(bed)
        core.delete_namespaced_pod(leader, NAMESPACE)
        deleted = time.monotonic()
        new_leader = wait_for(
            lambda: (h := _lease_holder(bed)) != leader and h, 60, what="the standby to lead"
        )
        took_over = time.monotonic() - deleted
        time.sleep(5)
    finally:
        stop.set()
        creator.join(timeout=30)
    assert not creator.is_alive() and not broke, broke
    # one create a second while the leader changed twice: a creator that stopped early would
    # leave the checks below little to check
    assert len(names) + len(refused) >= 5, names
    print(
        f"\n[figure] failover: killed container ready again after {back:.1f}s; after the "
        f"leading pod's deletion {new_leader} leads in {took_over:.1f}s; {len(names)} creates, "
        f"{len(refused)} refused"
    )
    assert not refused, refused
    for name in names:
        on_manager.wait_condition(name, "Complete", timeout=300)
        assert _winner(bed, real_namespace, name)


def test_an_image_that_cannot_be_pulled_shows_on_the_worker_and_the_manager(
    installed: Bed, real_namespace: str
) -> None:
    """No registry answers for the image: the kubelet's ErrImagePull / ImagePullBackOff is
    the TrainJob's PodsStuck condition on the worker and, brought back, on the manager, with
    a Warning Event on each."""
    manager = _manager(installed)
    name = f"pull-{uuid.uuid4().hex[:6]}"
    on_manager = TrainJobs(installed.api(manager), real_namespace)
    on_manager.create(_trainjob(name, numNodes=1, image="localhost/trainjob-bed/no-such:1"))
    stuck = on_manager.wait_condition(name, "PodsStuck", timeout=180)
    print(f"\n[figure] PodsStuck on the manager: {stuck['reason']}: {stuck['message']}")
    assert stuck["reason"] in ("ErrImagePull", "ImagePullBackOff"), stuck
    assert f"pod {name}-node-0-0-" in stuck["message"] and "no-such:1" in stuck["message"]
    # Kueue's waitForPodsReady evicts it after a while (20 s on the bed) and it is sent
    # again: look on whichever worker holds it.

    def stuck_on_a_worker() -> TrainJobs | None:
        worker = _winner(installed, real_namespace, name)
        on_worker = TrainJobs(installed.api(worker), real_namespace) if worker else None
        if on_worker and (on_worker.condition(name, "PodsStuck") or {}).get("status") == "True":
            return on_worker
        return None

    on_worker = wait_for(stuck_on_a_worker, 120, what="PodsStuck on the worker that holds it")
    for side in (on_worker, on_manager):
        wait_for(
            lambda side=side: any(
                r in ("ErrImagePull", "ImagePullBackOff") for r, _ in side.events(name)
            ),
            30,
            what="the Warning Event of the stuck pod",
        )
    on_manager.delete(name)


def test_a_product_container_with_a_bad_flag_crash_loops_with_a_clear_log_line(
    installed: Bed,
) -> None:
    """The dispatcher's Deployment as installed, with one unknown flag: the kubelet restarts
    the container in back-off (CrashLoopBackOff), and its log says which flag is wrong."""
    manager = _manager(installed)
    apps = client.AppsV1Api(installed.api(manager))
    core = client.CoreV1Api(installed.api(manager))
    installed_one = apps.read_namespaced_deployment(DISPATCHER, NAMESPACE)
    template = installed.api(manager).sanitize_for_serialization(installed_one.spec.template)
    labels = {"app.kubernetes.io/name": "trainjob-bad-flag"}
    template["metadata"] = {"labels": labels}
    (container,) = template["spec"]["containers"]
    container["command"] = [*container["command"], "--no-such-flag"]
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainjob-bad-flag", "namespace": NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": template},
    }
    apps.create_namespaced_deployment(NAMESPACE, bad)
    try:

        def crash_looping() -> Any:
            pods = core.list_namespaced_pod(
                NAMESPACE, label_selector="app.kubernetes.io/name=trainjob-bad-flag"
            ).items
            for pod in pods:
                for status in pod.status.container_statuses or []:
                    waiting = status.state.waiting
                    if waiting and waiting.reason == "CrashLoopBackOff":
                        return pod
            return None

        pod = wait_for(crash_looping, 120, what="the container with a bad flag in CrashLoopBackOff")
        log = core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, previous=True)
        print(f"\n[figure] a bad flag: {log.strip().splitlines()[-1]}")
        assert "unrecognized arguments: --no-such-flag" in log, log
        assert "Traceback" not in log, log
    finally:
        apps.delete_namespaced_deployment("trainjob-bad-flag", NAMESPACE)


def test_the_charts_web_view_reads_with_each_viewers_own_token(
    installed: Bed, real_namespace: str, tmp_path: Path
) -> None:
    """The chart's `manager.ui` as a pod from the product's image on the manager's node, as a
    platform puts it behind its authenticating proxy: it holds no token of its own, and what
    it reads it reads with the token each request carries (here, a tenant's with `view`)."""
    manager = _manager(installed)
    host = "trainjobs.example.test"
    values = {"enabled": True, "publicHosts": [host], "namespaces": [real_namespace]}
    docs = chart.template({"role": "manager", "manager": {"ui": values}})
    ours = [d for d in docs if d["metadata"]["name"] == "trainjob-ui"]
    assert {d["kind"] for d in ours} == {"Deployment", "Service", "NetworkPolicy"}
    applier = Applier(installed.api(manager))
    applier.apply_all(ours)
    try:
        installed.wait_deployment_ready(manager, NAMESPACE, "trainjob-ui")
        core = client.CoreV1Api(installed.api(manager))
        (pod,) = core.list_namespaced_pod(
            NAMESPACE, label_selector="app.kubernetes.io/name=trainjob-ui"
        ).items
        assert pod.spec.automount_service_account_token is False
        assert not [m for c in pod.spec.containers for m in c.volume_mounts or []
                    if "serviceaccount" in m.mount_path]  # fmt: skip
        (status,) = pod.status.container_statuses
        assert status.image == images.PRODUCT.name
        alice = Tenant(installed, real_namespace, "alice-ui", "view", tmp_path)
        base = f"http://{pod.status.pod_ip}:8080/k8s/apis/trainer.kubeflow.org/v1alpha1"

        def get(namespace: str, token: str | None, as_host: str = host) -> int:
            headers = {"Host": as_host, **({"Authorization": f"Bearer {token}"} if token else {})}
            request = urllib.request.Request(
                f"{base}/namespaces/{namespace}/trainjobs", headers=headers
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert json.load(answer)["kind"] == "TrainJobList"
                    return 200
            except urllib.error.HTTPError as exc:
                return exc.code

        assert get(real_namespace, alice.token) == 200
        assert get(NAMESPACE, alice.token) == 403  # RBAC on the manager says no
        assert get(real_namespace, None) == 401  # no token: nothing read
        assert get(real_namespace, alice.token, as_host="elsewhere.example") == 403
    finally:
        applier.remove_all(ours)


def test_a_job_moved_off_a_lost_worker_resumes_from_its_checkpoint(
    installed: Bed, real_namespace: str, tmp_path: Path
) -> None:
    """examples/torch-ddp-cpu.yaml's training, its runtime mounting one directory every
    worker's node shares (a hostPath: all real nodes of the bed are on this machine, as a
    fleet's nodes would mount one file system), and a TrainJob naming its checkpoints' place
    in `trainjob.dev/checkpoints`. Rank 0 saves every 5 steps and names each checkpoint in its
    progress reports; once the manager has one, its worker's API server stops (the worker
    lost). After the lost timeout the job runs on the other worker, given TRAINJOB_RESUME_FROM:
    its log starts at the step after the checkpoint, its losses are those the first run printed
    for the same steps (the same weights and batches), it completes, and the story shows both
    runs, the second starting at the checkpoint's step."""
    manager = _manager(installed)
    name = f"resume-{uuid.uuid4().hex[:6]}"
    shared = Path(tempfile.mkdtemp(prefix="trainjob-checkpoints-"))
    shared.chmod(0o777)
    docs = load_manifests(RUNTIME_FILE.read_text())
    runtime = next(d for d in docs if d["kind"] == "ClusterTrainingRuntime")
    runtime["metadata"]["name"] = f"torch-ckpt-{name}"
    pod = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["spec"]["volumes"] = [
        {"name": "checkpoints", "hostPath": {"path": str(shared), "type": "Directory"}}
    ]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "checkpoints", "mountPath": "/ckpt"}]
    for c in installed.config.clusters:
        Applier(installed.api(c.name)).apply_all([runtime])
    tj = _trainjob(
        name,
        env=[
            {"name": "TRAIN_STEPS", "value": "40"},
            {"name": "STEP_SECONDS", "value": "1"},
            {"name": "CHECKPOINT_EVERY", "value": "5"},
        ],
    )
    tj["spec"]["runtimeRef"]["name"] = runtime["metadata"]["name"]
    tj["metadata"]["annotations"] = {checkpoints.ANNOTATION: f"/ckpt/{name}"}
    bob = Tenant(installed, real_namespace, "bob", "edit", tmp_path)
    on_manager = TrainJobs(bob.api, real_namespace)
    on_manager.create(tj)

    def saved() -> int:
        found = checkpoints.reported(TrainJobView(on_manager.get(name)).trainer_status)
        return found.step if found and found.step and found.step >= 10 else 0

    step = wait_for(saved, 300, what=f"a checkpoint of {name} reported on the manager")
    lost = _winner(installed, real_namespace, name)
    before = _loss_lines(installed, real_namespace, name)
    assert before and before[0][0] == 1, before
    installed.stop_component(lost, "kube-apiserver")
    stopped = time.monotonic()
    try:
        (other,) = [w.name for w in installed.config.workers if w.name != lost]
        wait_for(
            lambda: (on_manager.get(name).get("status") or {}).get("clusterName") == other,
            240,
            what=f"{name} sent to {other}",
        )
        moved = time.monotonic() - stopped
        on_manager.wait_condition(name, "Complete", timeout=300)
        copy = TrainJobs(installed.api(other), real_namespace).get(name)
        env = {e["name"]: e.get("value") for e in copy["spec"]["trainer"]["env"]}
        resumed = int(env["TRAINJOB_RESUME_STEP"])
        assert resumed >= step and resumed % 5 == 0, env
        assert env["TRAINJOB_RESUME_FROM"] == f"/ckpt/{name}/step-{resumed:06d}.pt", env
        logs = _plugin(installed, "logs", name, "-n", real_namespace).stdout
        assert f"resumed from /ckpt/{name}/step-{resumed:06d}.pt at step {resumed}" in logs, logs
        after = [(int(m[1]), float(m[3])) for m in LOSS.finditer(logs)]
        assert [s for s, _ in after] == list(range(resumed + 1, 41)), after
        # the training goes on: the steps both runs made have the same loss
        both = sorted({s for s, _ in before} & {s for s, _ in after})
        assert all(dict(before)[s] == dict(after)[s] for s in both), (before, after)
        core = client.CoreV1Api(installed.api(manager))
        reasons = [
            e.reason
            for e in core.list_namespaced_event(
                real_namespace, field_selector=f"involvedObject.name={name}"
            ).items
        ]
        assert "ResumedFromCheckpoint" in reasons and "ClusterLost" in reasons, reasons
        code, story = bob.get(story_path(real_namespace, name))
        assert code == 200, story
        runs = [
            (r["worker"], r["startStep"], r["resumedFrom"], r["current"])
            for r in story["placements"]
        ]
        assert runs[0][:3] == (lost, 0, None), runs
        assert runs[-1] == (other, resumed, f"step-{resumed:06d}.pt", True), runs
        print(
            f"\n[figure] checkpoint-aware move: the last step read before {lost}'s API server "
            f"stopped was {before[-1][0]}; the job ran on {other} {moved:.0f}s later (the lost "
            f"timeout is 30s) from checkpoint step {resumed}: steps run again "
            f"{before[-1][0] - resumed} (from step 0: {before[-1][0]})"
        )
    finally:
        installed.restore_api_server(lost, wait_runs_jobs=False)
        for c in installed.config.clusters:
            with contextlib.suppress(client.ApiException):
                Applier(installed.api(c.name)).delete_all([runtime])
        shutil.rmtree(shared, ignore_errors=True)


def _loss_lines(bed: Bed, namespace: str, name: str) -> list[tuple[int, float]]:
    out = _plugin(bed, "logs", name, "-n", namespace).stdout
    return [(int(m[1]), float(m[3])) for m in LOSS.finditer(out)]


def test_the_sdk_example_trains_a_function_on_a_worker(
    installed: Bed, real_namespace: str, tmp_path: Path
) -> None:
    """examples/sdk_train.py as an ML engineer runs it with the `edit` role on the manager: the
    Kubeflow SDK sends its `train` function to the torch runtime (CustomTrainer: the SDK writes
    the function into the pod and runs it with torchrun), the job runs on 2 pods of a worker,
    the loss falls, and it ends Complete on the manager."""
    from kubeflow.trainer import KubernetesBackendConfig, TrainerClient

    spec = importlib.util.spec_from_file_location("sdk_train", SDK_EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    carol = Tenant(installed, real_namespace, "carol", "edit", tmp_path)
    sdk = TrainerClient(
        KubernetesBackendConfig(namespace=real_namespace, config_file=str(carol.kubeconfig))
    )
    name = example.submit(
        sdk,
        queue="q",
        runtime="torch-ddp-cpu",
        image="docker.io/pytorch/pytorch:2.6.0-cuda12.4-cudnn9-runtime",
        resources={"cpu": "500m", "memory": "512Mi"},
    )
    job = sdk.wait_for_job_status(name, {"Complete", "Failed"}, timeout=300)
    logs = _plugin(installed, "logs", name, "-n", real_namespace).stdout
    assert job.status == "Complete", (job, logs)
    lines = [(int(m[1]), float(m[3])) for m in LOSS.finditer(logs)]
    assert [s for s, _ in lines] == list(range(1, 31)), logs
    assert lines[-1][1] < lines[0][1] and "done on " in logs, logs


def test_a_ddp_job_whose_pod_is_killed_restarts_and_completes(
    installed: Bed, real_namespace: str
) -> None:
    """examples/torch-ddp-cpu.yaml's training under a runtime whose JobSet template says
    `failurePolicy: {maxRestarts: 1}` (its pods `restartPolicy: Never`, `backoffLimit: 0`: a
    pod that dies fails its Job, as JobSet users set them). Rank 0's container is killed
    mid-run (SIGKILL through containerd, as an OOM kill or a node's fault would): its Job
    fails, the worker controller restarts the TrainJob's Jobs (status.restarts 1, JobSet's
    Warning), the new pods train from the start and the TrainJob ends Complete on the manager."""
    manager = _manager(installed)
    name = f"restart-{uuid.uuid4().hex[:6]}"
    docs = load_manifests(RUNTIME_FILE.read_text())
    runtime = next(d for d in docs if d["kind"] == "ClusterTrainingRuntime")
    runtime["metadata"]["name"] = f"torch-restart-{name}"
    spec = runtime["spec"]["template"]["spec"]
    spec["failurePolicy"] = {"maxRestarts": 1}
    job = spec["replicatedJobs"][0]["template"]["spec"]
    job["backoffLimit"] = 0
    job["template"]["spec"]["restartPolicy"] = "Never"
    for c in installed.config.clusters:
        Applier(installed.api(c.name)).apply_all([runtime])
    try:
        tj = _trainjob(
            name,
            env=[{"name": "TRAIN_STEPS", "value": "30"}, {"name": "STEP_SECONDS", "value": "1"}],
        )
        tj["spec"]["runtimeRef"]["name"] = runtime["metadata"]["name"]
        on_manager = TrainJobs(installed.api(manager), real_namespace)
        on_manager.create(tj)
        wait_for(
            lambda: len(_loss_lines(installed, real_namespace, name)) >= 5,
            300,
            what=f"{name} training",
        )
        worker = _winner(installed, real_namespace, name)
        node = installed.node(worker)
        assert node is not None
        core = client.CoreV1Api(installed.api(worker))
        (rank0,) = [
            p
            for p in TrainJobs(installed.api(worker), real_namespace).pods(name)
            if p.metadata.labels.get("batch.kubernetes.io/job-completion-index") == "0"
        ]
        (status,) = rank0.status.container_statuses
        nodes.ctr(node, "tasks", "kill", "--signal", "SIGKILL", status.container_id.split("://")[1])
        killed = time.monotonic()

        def restarted_running() -> bool:
            pods = TrainJobs(installed.api(worker), real_namespace).pods(name)
            again = [
                p
                for p in pods
                if p.metadata.labels.get("jobset.sigs.k8s.io/restart-attempt") == "1"
            ]
            return len(again) == 2 and all(p.status.phase == "Running" for p in again)

        wait_for(restarted_running, 180, what=f"{name}'s restarted pods running")
        back = time.monotonic() - killed
        on_manager.wait_condition(name, "Complete", timeout=300)
        assert on_manager.get(name)["status"]["restarts"] == 1
        reasons = [
            e.reason
            for e in core.list_namespaced_event(
                real_namespace, field_selector=f"involvedObject.name={name}"
            ).items
        ]
        assert "RestartJobSetFailurePolicyAction" in reasons, reasons
        lines = _loss_lines(installed, real_namespace, name)
        assert [s for s, _ in lines] == list(range(1, 31)), lines  # the new run's log
        print(f"\n[figure] a killed pod's job restarted: pods Running again {back:.1f}s after")
    finally:
        for c in installed.config.clusters:
            with contextlib.suppress(client.ApiException):
                Applier(installed.api(c.name)).delete_all([runtime])
