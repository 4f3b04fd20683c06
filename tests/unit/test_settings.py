"""Controller settings and the command line derived from them (pure)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dispatcher.controller import watches as dispatcher_watches
from dispatcher.settings import DispatcherSettings
from kubecontrol.controller import Watch, credentials
from trainjob.caches import Caches, Index
from trainjob_api import constants as c
from worker_controller import watches as worker_watches
from worker_controller.settings import WorkerSettings


def test_unset_flags_take_the_models_defaults_and_set_ones_are_typed() -> None:
    settings, verbose = DispatcherSettings.from_argv(
        ["--strategy", "Incremental", "--incremental-batch", "2", "--verbose"], "d", None
    )
    assert settings.strategy == "Incremental" and settings.incremental_batch == 2 and verbose
    assert settings.resync_seconds == 30.0 and settings.cluster_name == "manager"
    worker, verbose = WorkerSettings.from_argv([], "w", None)
    assert worker.cluster_name == "worker" and worker.resync_seconds == 10.0 and not verbose


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--resync-seconds", "0"], "--resync-seconds: Input should be greater than 0"),
        (["--workers", "many"], "--workers: Input should be a valid integer"),
        (
            ["--webhook-port", "9443"],
            "--webhook-port needs --webhook-cert-secret (we keep our own certificate) or",
        ),
        (["--kubeconfig", "/no/such/file"], "--kubeconfig /no/such/file does not exist"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        WorkerSettings.from_argv(argv, "w", None)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_strategy_outside_the_choices_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        DispatcherSettings.from_argv(["--strategy", "Random"], "d", None)
    assert "invalid choice: 'Random'" in capsys.readouterr().err


def test_a_config_file_sets_what_the_flags_do_not(tmp_path: Path) -> None:
    config = tmp_path / "dispatcher.yaml"
    config.write_text("workerLostTimeout: 120\nleader-elect: true\nresync_seconds: 5\n")
    settings, _ = DispatcherSettings.from_argv(
        ["--config", str(config), "--resync-seconds", "7"], "d", None
    )
    assert settings.worker_lost_timeout == 120.0 and settings.leader_elect is True
    assert settings.resync_seconds == 7.0  # the flag wins over the file
    assert DispatcherSettings.from_argv(["--leader-elect"], "d", None)[0].leader_elect is True
    off = DispatcherSettings.from_argv(["--leader-elect=false"], "d", None)[0]
    assert off.leader_elect is False


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read it: No such file or directory"),
        ("[1, 2]\n", "must be a mapping of settings"),
        ("workerLostTimout: 3\n", "unknown setting 'workerLostTimout'"),
        ("a: [\n", "not YAML"),
        ("workerLostTimeout: soon\n", "--worker-lost-timeout: Input should be a valid number"),
    ],
)
def test_a_bad_config_file_is_refused_naming_the_file_or_the_setting(
    tmp_path: Path, content: str | None, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "dispatcher.yaml"
    if content is not None:
        config.write_text(content)
    with pytest.raises(SystemExit) as exited:
        DispatcherSettings.from_argv(["--config", str(config)], "d", None)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_lease_timings_must_leave_room_to_renew(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        WorkerSettings.from_argv(["--renew-deadline-seconds", "20"], "w", None)
    assert "--lease-duration-seconds must be greater than --renew-deadline-seconds" in (
        capsys.readouterr().err
    )


def test_credentials_are_found_in_controller_runtimes_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flag, env, home = (tmp_path / n for n in ("flag", "env", "home"))
    flag.write_text("{}")
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("{}")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBECONFIG", str(env))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    with_flag = WorkerSettings(kubeconfig=flag)
    assert credentials(with_flag) == flag
    assert credentials(WorkerSettings()) == env
    monkeypatch.delenv("KUBECONFIG")
    assert credentials(WorkerSettings()) is None  # in-cluster
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert credentials(WorkerSettings()) == home / ".kube" / "config"


def test_a_taken_probe_port_is_refused_naming_the_settings() -> None:
    import socket

    from kubecontrol.serving import serve_probes

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=r"--bind-address, --health-port\): Address already"):
            serve_probes("127.0.0.1", port, lambda: None)


KUEUE_CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-prod
multiKueue:
  gcInterval: 1m30s
  origin: east-manager
  workerLostTimeout: 5m
  dispatcherName: kueue.x-k8s.io/multikueue-dispatcher-incremental
  incrementalDispatcherConfig:
    stepSize: 2
waitForPodsReady:
  timeout: 10m
"""


def test_kueues_own_multikueue_settings_are_ours_unless_a_flag_says_otherwise(
    tmp_path: Path,
) -> None:
    cfg = tmp_path / "controller_manager_config.yaml"
    cfg.write_text(KUEUE_CONFIG)
    settings, _ = DispatcherSettings.from_argv(["--kueue-config", str(cfg)], "d", None)
    assert settings.namespace == "kueue-prod" and settings.origin == "east-manager"
    assert settings.gc_interval == 90.0 and settings.worker_lost_timeout == 300.0
    assert settings.strategy == "Incremental" and settings.incremental_batch == 2
    ours = tmp_path / "dispatcher.yaml"
    ours.write_text("origin: from-our-file\n")
    argv = ["--kueue-config", str(cfg), "--config", str(ours), "--worker-lost-timeout", "60"]
    settings, _ = DispatcherSettings.from_argv(argv, "d", None)
    assert settings.origin == "from-our-file" and settings.worker_lost_timeout == 60.0
    assert settings.gc_interval == 90.0  # what neither of ours sets still comes from Kueue's
    off = tmp_path / "gc-off.yaml"
    off.write_text("multiKueue:\n  gcInterval: 0s\n")
    settings, _ = DispatcherSettings.from_argv(["--kueue-config", str(off)], "d", None)
    assert settings.gc_interval == 0.0 and settings.origin == "multikueue"  # Kueue's default
    external = tmp_path / "external.yaml"
    external.write_text("multiKueue:\n  dispatcherName: example.com/my-dispatcher\n")
    settings, _ = DispatcherSettings.from_argv(["--kueue-config", str(external)], "d", None)
    assert settings.strategy == "External"
    gated = tmp_path / "gated.yaml"
    gated.write_text("featureGates:\n  MultiKueueOrchestratedPreemption: true\n")
    settings, _ = DispatcherSettings.from_argv(["--kueue-config", str(gated)], "d", None)
    assert settings.orchestrated_preemption and not settings.cluster_profiles
    assert settings.single_cluster_preemption_timeout == 300.0  # Kueue's
    argv = ["--kueue-config", str(gated), "--orchestrated-preemption", "false"]
    assert not DispatcherSettings.from_argv(argv, "d", None)[0].orchestrated_preemption


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("multiKueue:\n  gcInterval: soon\n", "multiKueue.gcInterval: 'soon' is not a duration"),
        ("multiKueue: [1]\n", "multiKueue must be a mapping"),
        ("[]\n", "must be a mapping"),
        ("featureGates: [x]\n", "featureGates must be a mapping"),
        (
            "featureGates:\n  MultiKueueOrchestratedPreemption: 'yes'\n",
            "featureGates.MultiKueueOrchestratedPreemption: 'yes' is not true or false",
        ),
    ],
)
def test_a_kueue_config_we_cannot_use_is_refused_naming_the_field(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "kueue.yaml"
    cfg.write_text(text)
    with pytest.raises(SystemExit) as exited:
        DispatcherSettings.from_argv(["--kueue-config", str(cfg)], "d", None)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--kueue-config {cfg}" in err and message in err, err


def test_coexist_mode_takes_its_own_controller_name_and_origin_and_refuses_kueues(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings, _ = DispatcherSettings.from_argv([], "d", None)
    assert settings.mode == "Replace"
    assert (settings.controller_name, settings.origin) == (
        "kueue.x-k8s.io/multikueue",
        "multikueue",
    )
    settings, _ = DispatcherSettings.from_argv(["--mode", "Coexist"], "d", None)
    assert (settings.controller_name, settings.origin) == (
        "trainjob.dev/multikueue",
        "trainjob-multikueue",
    )
    # Kueue's origin in its Configuration is Kueue's own in Coexist mode, never ours.
    cfg = tmp_path / "controller_manager_config.yaml"
    cfg.write_text(KUEUE_CONFIG)
    argv = ["--mode", "Coexist", "--kueue-config", str(cfg)]
    settings, _ = DispatcherSettings.from_argv(argv, "d", None)
    assert settings.origin == "trainjob-multikueue" and settings.kueue_origin == "east-manager"
    assert settings.gc_interval == 90.0 and settings.namespace == "kueue-prod"
    for extra, message in (
        (["--controller-name", "kueue.x-k8s.io/multikueue"], "Kueue's own MultiKueue serves"),
        (["--origin", "east-manager"], "must differ from Kueue's origin 'east-manager'"),
    ):
        with pytest.raises(SystemExit) as exited:
            DispatcherSettings.from_argv([*argv, *extra], "d", None)
        assert exited.value.code == 2
        err = capsys.readouterr().err
        assert message in err, err


REPO = Path(__file__).resolve().parents[2]


def _table(controller: Any, settings: Any) -> list[Watch]:
    table: list[Watch] = controller.watches(SimpleNamespace(settings=settings))
    return table


def _reads() -> dict[str, set[str]]:
    """Each read of trainjob/caches.py's `Caches` -> the caches it reads (by `Index`)."""
    methods = inspect.getmembers(Caches, inspect.isfunction)
    found = {
        name: {Index[m].value for m in re.findall(r"Index\.([A-Z_]+)", inspect.getsource(fn))}
        for name, fn in methods
        if fn.__qualname__.startswith("Caches.")
    }
    for name, fn in methods:  # reads that go through other reads
        for other in re.findall(r"self\.([a-z_]+)\(", inspect.getsource(fn)):
            found.setdefault(name, set()).update(found.get(other, set()))
    return found


# Helpers that read a cache for their caller, handed the caches: (call, the typed read).
CACHE_HELPERS = ((r"\blocal_queue\(\s*(?:ctx\.)?caches\b", "local_queue"),)


def _caches_named(package: str) -> set[str]:
    """Every cache the code of a package reads, through the typed reads it calls, itself or
    through a helper it hands the caches (CACHE_HELPERS)."""
    reads = _reads()
    named = set()
    for path in (REPO / package).rglob("*.py"):
        text = path.read_text()
        called = re.findall(r"caches\.([a-z_]+)\(", text)
        called += [read for pattern, read in CACHE_HELPERS if re.search(pattern, text)]
        named |= {index for read in called for index in reads.get(read, set())}
    return named


def test_the_typed_reads_name_their_caches() -> None:
    reads = _reads()
    assert reads["trainjob"] == {Index.TRAINJOBS} and reads["jobs_of"] == {Index.JOBS}
    assert reads["cluster_labels"] == {Index.CLUSTERS}


@pytest.mark.parametrize(
    ("controller", "settings", "package"),
    [
        (dispatcher_watches, DispatcherSettings(), "dispatcher"),
        (worker_watches, WorkerSettings(), "worker_controller"),
    ],
)
def test_each_controller_watches_every_cache_its_code_reads_once(
    controller: Any, settings: Any, package: str
) -> None:
    table = _table(controller, settings)
    names = [w.index for w in table] + [w.groups for w in table if w.groups]
    assert len(names) == len(set(names)), names
    assert _caches_named(package) <= set(names), _caches_named(package) - set(names)
    assert len(_caches_named(package)) >= 5
    assert len({w.kind for w in table}) == len(table)  # one informer a kind


def test_the_worker_keeps_only_its_own_jobs_services_and_pods() -> None:
    """The API server filters Services and pods by our label; Jobs are kept by their
    controller owner, a TrainJob (a label whoever may edit Jobs can take off, and the Job with
    it out of the cache): a cluster's other Jobs never reach the cache."""
    table = {w.kind: w for w in _table(worker_watches, WorkerSettings())}
    for kind in (c.SERVICE, c.POD):
        assert table[kind].label_selector == c.TRAINJOB_NAME_LABEL
        assert table[kind].group_by is not None
    jobs = table[c.JOB]
    assert jobs.label_selector == "" and jobs.keep is not None and jobs.group_by is not None
    owner = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "t"}
    assert jobs.keep({"metadata": {"ownerReferences": [{**owner, "controller": True}]}})
    assert not jobs.keep({"metadata": {"ownerReferences": [owner]}})  # not its controller
    assert not jobs.keep(
        {"metadata": {"ownerReferences": [{**owner, "kind": "JobSet", "controller": True}]}}
    )
    assert not jobs.keep({"metadata": {"labels": {c.TRAINJOB_NAME_LABEL: "t"}}})
    other = {**owner, "apiVersion": "other.example/v1", "controller": True}
    assert not jobs.keep({"metadata": {"ownerReferences": [other]}})
    assert table[c.EVENT].field_selector == worker_watches.FAILED_CREATE_EVENTS
    quiet = _table(worker_watches, WorkerSettings(pod_summary=False))
    assert {w.kind for w in quiet}.isdisjoint({c.POD, c.EVENT})


def test_the_kinds_a_tenant_sizes_are_listed_in_small_pages() -> None:
    """A page is held whole before the informer's transform cuts it down: TrainJobs,
    Workloads, runtimes, Jobs, pods, Secrets and ConfigMaps may each be as large as etcd
    stores, and a tenant makes them; the platform's kinds keep client-go's 500."""
    from kubebase.kinds import CONFIG_MAP, SECRET
    from kubecontrol import controller
    from kubecontrol.informer import PAGE, TENANT_SIZED_PAGE

    tenants = {c.TRAINJOB, c.WORKLOAD, c.TRAINING_RUNTIME, c.JOB, c.POD, SECRET, CONFIG_MAP}
    tenants.add(c.SERVICE)  # the worker's Services share their Watch with its Jobs
    for controller_watches, settings in (
        (dispatcher_watches, DispatcherSettings()),
        (worker_watches, WorkerSettings()),
    ):
        for watch in _table(controller_watches, settings):
            want = TENANT_SIZED_PAGE if watch.kind in tenants else PAGE
            assert watch.page == want, (controller_watches.__name__, watch.kind.kind)
    ctx = SimpleNamespace(
        settings=SimpleNamespace(cluster_name="c"), synced=None, informers={}, indexes={},
        optional=set(),
    )  # fmt: skip
    (informer,) = controller.informers(ctx, SimpleNamespace(api=None), [Watch("i", c.POD, page=7)])  # type: ignore[arg-type]
    assert informer._page == 7


def test_kueues_gates_turned_off_stay_off_and_a_number_is_no_gate(tmp_path: Path) -> None:
    cfg = tmp_path / "gates.yaml"
    cfg.write_text(
        "featureGates:\n"
        "  MultiKueueClusterProfile: true\n"
        "  MultiKueueOrchestratedPreemption: false\n"
    )
    settings, _ = DispatcherSettings.from_argv(["--kueue-config", str(cfg)], "d", None)
    assert settings.cluster_profiles and not settings.orchestrated_preemption
    cfg.write_text("featureGates:\n  MultiKueueOrchestratedPreemption: 1\n")
    with pytest.raises(SystemExit):
        DispatcherSettings.from_argv(["--kueue-config", str(cfg)], "d", None)
    with pytest.raises(SystemExit):
        DispatcherSettings.from_argv(["--single-cluster-preemption-timeout", "0"], "d", None)
