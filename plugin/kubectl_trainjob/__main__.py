"""`kubectl trainjob`: TrainJobs across a MultiKueue manager and its workers, in one view.

    kubectl trainjob list [-A] [-o json|yaml]
    kubectl trainjob describe NAME [-o json|yaml]
    kubectl trainjob logs NAME [-f] [--node N] [--replicated-job node] [-c CONTAINER]
                              [--pod POD] [-p] [--since 10m] [--timestamps] [--tail N]
    kubectl trainjob progress NAME [-w] [-o json|yaml]
    kubectl trainjob ui [--port P] [--namespaces A,B] [--no-browser]
    kubectl trainjob ui --behind-proxy --public-host H --address 0.0.0.0 --port 8080
    kubectl trainjob completion bash|zsh|tcsh
    kubectl trainjob --version

Installed as the console script `kubectl-trainjob`, which kubectl finds on PATH. It talks to
the manager with your kubeconfig (`--kubeconfig`, `--context`, `-n`). A TrainJob's logs and
what its worker shows are read through the manager's view.trainjob.dev API (the dispatcher
reads the worker; RBAC on the manager decides who may) when the manager serves it. Otherwise,
or with `--direct`, the worker that runs the TrainJob is reached with, in this order:
`--worker-context WORKER=CONTEXT`, a context of your kubeconfig named after the worker's
MultiKueueCluster, or the kubeconfig Secret that MultiKueueCluster names (in Kueue's
namespace, `--kueue-namespace`), if you may read it.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import json
import re
import sys
from typing import Any

import urllib3
import yaml
from kubernetes import client, config, watch

from kubebase.kubeconfig import vet_kubeconfig
from kubebase.objects import Dict
from kubectl_trainjob import version
from kubectl_trainjob.view import (
    WorkerView,
    describe,
    list_table,
    printable,
    progress_bar,
    state_of,
)
from trainjob_api import constants as c
from trainjob_api.story import Copy, TrainJobStory, event_of, pod_of
from trainjob_api.views import TrainJobView, WorkloadView

TIMEOUT = 10  # seconds for each request; an unreachable worker is said, not waited for
STORY_API = f"/apis/view.{c.DOMAIN}/v1alpha1"


class PluginError(Exception):
    """Said to the user as `error: ...`, exit code 1."""


def _reason(exc: Exception) -> str:
    if isinstance(exc, client.ApiException):
        body = exc.body
        try:
            message = yaml.safe_load(body).get("message") if body else None
        except Exception:  # not the API's JSON: the raw reason will do
            message = None
        return f"{exc.status} {message or exc.reason}"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


class Clusters:
    """The manager's client, and each worker's once asked for."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        try:
            self.manager = config.new_client_from_config(
                config_file=args.kubeconfig, context=args.context
            )
            contexts, active = config.list_kube_config_contexts(config_file=args.kubeconfig)
        except Exception as exc:
            raise PluginError(f"cannot load your kubeconfig: {exc}") from None
        self.contexts = {ctx["name"] for ctx in contexts}
        current = next((x for x in contexts if x["name"] == args.context), active)
        self.namespace = args.namespace or (current.get("context") or {}).get(
            "namespace", "default"
        )
        self.worker_contexts = dict(
            item.split("=", 1) for item in args.worker_context or [] if "=" in item
        )

    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.manager)

    def story_api(self) -> bool:
        """Whether the manager serves the view.trainjob.dev API (and --direct is not given)."""
        if self.args.direct:
            return False
        try:
            self.get(STORY_API)
        except Exception:  # not installed (404), not available (503): the worker directly
            return False
        return True

    def get(
        self, path: str, *, stream: bool = False, timeout: float | None = TIMEOUT, **query: Any
    ) -> Any:
        """GET a path of the manager's API with the user's own identity: the decoded JSON, or
        with `stream` the open answer."""
        answer = self.manager.call_api(
            path,
            "GET",
            query_params=[(k, v) for k, v in query.items() if v not in (None, "")],
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=timeout,
        )
        return answer if stream else json.loads(answer.data)

    def worker(self, name: str) -> client.ApiClient:
        """A client for worker `name`, or PluginError saying each way tried and why not."""
        tried = []
        ctx = self.worker_contexts.get(name) or (name if name in self.contexts else None)
        if ctx:
            try:
                return config.new_client_from_config(config_file=self.args.kubeconfig, context=ctx)
            except Exception as exc:
                tried.append(f"context {ctx!r}: {exc}")
        else:
            tried.append(f"no context named {name!r} in your kubeconfig (or --worker-context)")
        try:
            mkc = self.custom().get_cluster_custom_object(
                c.KUEUE_GROUP,
                c.KUEUE_VERSION,
                "multikueueclusters",
                name,
                _request_timeout=TIMEOUT,
            )
            ref = ((mkc.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig") or {}
            if ref.get("locationType", "Secret") != "Secret":
                raise PluginError(
                    f"its kubeconfig is a file on the manager ({ref.get('location')})"
                )
            where = f"Secret {self.args.kueue_namespace}/{ref.get('location')}"
            secret = client.CoreV1Api(self.manager).read_namespaced_secret(
                str(ref.get("location")), self.args.kueue_namespace, _request_timeout=TIMEOUT
            )
            raw = (secret.data or {}).get("kubeconfig")
            if not raw:
                raise PluginError(f"{where} has no key 'kubeconfig'")
            # Vetted by our own rules before the client library sees it: a kubeconfig from
            # the cluster could name an exec or auth-provider command to run here.
            vetted, problem = vet_kubeconfig(base64.b64decode(raw), where)
            if vetted is None:
                assert problem is not None
                raise PluginError(f"{problem.reason}: {problem.message}")
            return config.new_client_from_config_dict(vetted)
        except PluginError as exc:
            tried.append(f"MultiKueueCluster {name}: {exc}")
        except Exception as exc:
            tried.append(f"MultiKueueCluster {name} and its Secret: {_reason(exc)}")
        raise PluginError(f"cannot reach worker {name}: " + "; ".join(tried))


def _trainjob(clusters: Clusters, name: str) -> TrainJobView:
    try:
        found: Dict = clusters.custom().get_namespaced_custom_object(
            c.TRAINER_GROUP,
            c.TRAINER_VERSION,
            clusters.namespace,
            c.TRAINJOB_PLURAL,
            name,
            _request_timeout=TIMEOUT,
        )
        return TrainJobView(found)
    except client.ApiException as exc:
        if exc.status == 404:
            raise PluginError(
                f'TrainJob "{name}" not found in namespace "{clusters.namespace}"'
            ) from None
        raise  # said as kubectl says it (_error_line): the server's message names the object


def _workload(clusters: Clusters, tj: TrainJobView) -> WorkloadView | None:
    """Its Workload, selected by the API server: Kueue's label of the job's UID (which the
    dispatcher's Workloads carry too), kept only when the TrainJob owns it."""
    items = clusters.custom().list_namespaced_custom_object(
        c.KUEUE_GROUP,
        c.KUEUE_VERSION,
        clusters.namespace,
        "workloads",
        label_selector=f"{c.KUEUE_JOB_UID_LABEL}={tj.uid}",
        _request_timeout=TIMEOUT,
    )["items"]
    found = (WorkloadView(x) for x in items)
    return next(
        (wl for wl in found if any(o.get("uid") == tj.uid for o in wl.owner_references)), None
    )


SELECTED_EVENTS = 8  # objects whose Events are selected by the API server, one request each


def _events(api: client.ApiClient, namespace: str, names: set[str]) -> list[Dict]:
    """Events of the objects named `names` (the API server selects them, a request per name,
    for a few; the namespace's, filtered here, for more); of pods, only the warnings."""
    core = client.CoreV1Api(api)
    if len(names) <= SELECTED_EVENTS:
        found = []
        for name in sorted(names):
            found += core.list_namespaced_event(
                namespace, field_selector=f"involvedObject.name={name}", _request_timeout=TIMEOUT
            ).items
    else:
        every = core.list_namespaced_event(namespace, _request_timeout=TIMEOUT).items
        found = [e for e in every if e.involved_object.name in names]
    found.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return [
        api.sanitize_for_serialization(e)
        for e in found
        if e.involved_object.kind != "Pod" or e.type == "Warning"
    ]


def _pods(api: client.ApiClient, namespace: str, tj: str, selector: str = "") -> list[Dict]:
    labels = f"{c.JOBSET_NAME_LABEL}={tj}" + (f",{selector}" if selector else "")
    items = (
        client.CoreV1Api(api)
        .list_namespaced_pod(namespace, label_selector=labels, _request_timeout=TIMEOUT)
        .items
    )
    return [api.sanitize_for_serialization(p) for p in items]


def _where_it_runs(clusters: Clusters, tj: TrainJobView) -> tuple[str, client.ApiClient]:
    """(worker name, client) of the cluster whose pods run the TrainJob: its worker, or the
    manager itself for a TrainJob MultiKueue does not dispatch."""
    worker = tj.cluster_name
    if worker:
        return str(worker), clusters.worker(str(worker))
    if tj.multikueue:
        raise PluginError(
            f"TrainJob {tj.name} runs on no worker yet ({state_of(tj)}); "
            "`kubectl trainjob describe` says why"
        )
    return "this cluster", clusters.manager


def _as(output: str, obj: Any) -> str:
    """`obj` as JSON or YAML (`-o`), as kubectl prints an object."""
    if output == "json":
        return json.dumps(obj, indent=4, sort_keys=False, default=str)
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False).rstrip("\n")


def cmd_list(clusters: Clusters, args: argparse.Namespace) -> str:
    group, version, plural = c.TRAINER_GROUP, c.TRAINER_VERSION, c.TRAINJOB_PLURAL
    custom = clusters.custom()
    try:
        if args.all_namespaces:
            items = custom.list_cluster_custom_object(
                group, version, plural, _request_timeout=TIMEOUT
            )["items"]
        else:
            items = custom.list_namespaced_custom_object(
                group, version, clusters.namespace, plural, _request_timeout=TIMEOUT
            )["items"]
    except client.ApiException as exc:
        if exc.status == 404:  # Trainer's CRD is not installed on this cluster
            raise PluginError(f'the server doesn\'t have a resource type "{plural}"') from None
        raise
    if args.output:
        return _as(args.output, {"apiVersion": "v1", "kind": "List", "items": items})
    if not items:
        where = "any namespace" if args.all_namespaces else f"namespace {clusters.namespace}"
        return f"No TrainJobs found in {where}."
    return list_table(
        [TrainJobView(x) for x in items], dt.datetime.now(dt.timezone.utc), args.all_namespaces
    )


def cmd_describe(clusters: Clusters, args: argparse.Namespace) -> str:
    if args.output and clusters.story_api():  # the story itself, as the manager serves it
        path = f"{STORY_API}/namespaces/{clusters.namespace}/trainjobs/{args.name}/story"
        try:
            return _as(args.output, clusters.get(path))
        except Exception as exc:
            raise PluginError(f"cannot read the story of {args.name}: {_reason(exc)}") from None
    tj = _trainjob(clusters, args.name)
    ns, name = clusters.namespace, args.name
    workload = _workload(clusters, tj)
    names = {name, *([workload.name] if workload else [])}
    events = [event_of(e, "manager") for e in _events(clusters.manager, ns, names)]
    worker_name = tj.cluster_name
    view = None
    if worker_name and clusters.story_api():
        view = _worker_view_of_story(clusters, name, worker_name)
    elif worker_name:
        view = _worker_view_direct(clusters, name, worker_name)
    if args.output:  # no story API on this manager: what was read, as read
        worker = None
        if view is not None:
            worker = {
                "name": view.name,
                "error": view.error,
                "copy": view.copy.model_dump(by_alias=True, exclude_none=True)
                if view.copy
                else None,
                "pods": [p.model_dump(by_alias=True, exclude_none=True) for p in view.pods],
                "events": [e.model_dump(by_alias=True, exclude_none=True) for e in view.events],
            }
        return _as(
            args.output,
            {
                "trainJob": tj.raw,
                "workload": workload.raw if workload else None,
                "events": [e.model_dump(by_alias=True, exclude_none=True) for e in events],
                "worker": worker,
            },
        )
    return describe(tj, workload, events, view, dt.datetime.now(dt.timezone.utc))


def _worker_view_direct(clusters: Clusters, name: str, worker: str) -> WorkerView:
    """What the worker shows, read there with the user's own credentials."""
    ns = clusters.namespace
    try:
        api = clusters.worker(worker)
        remote = client.CustomObjectsApi(api).get_namespaced_custom_object(
            c.TRAINER_GROUP,
            c.TRAINER_VERSION,
            ns,
            c.TRAINJOB_PLURAL,
            name,
            _request_timeout=TIMEOUT,
        )
        pods = _pods(api, ns, name)
        wevents = _events(api, ns, {name, *(p["metadata"]["name"] for p in pods)})
        return WorkerView(
            worker,
            Copy.model_validate({"status": remote.get("status") or {}}),
            [pod_of(p, worker) for p in pods],
            [event_of(e, worker) for e in wevents],
        )
    except PluginError as exc:
        return WorkerView(worker, error=str(exc))
    except client.ApiException as exc:
        if exc.status == 404:
            return WorkerView(worker)
        return WorkerView(worker, error=f"unreadable: {_reason(exc)}")
    except Exception as exc:  # connection refused, timeout: the worker is unreachable
        return WorkerView(worker, error=f"unreachable: {_reason(exc)}")


def _worker_view_of_story(clusters: Clusters, name: str, worker: str) -> WorkerView:
    """What the worker shows, as the manager's view.trainjob.dev API tells it."""
    try:
        found = clusters.get(f"{STORY_API}/namespaces/{clusters.namespace}/trainjobs/{name}/story")
        story = TrainJobStory.model_validate(found)
    except Exception as exc:
        return WorkerView(worker, error=f"unreadable through the manager: {_reason(exc)}")
    if story.worker_problem:
        return WorkerView(worker, error=story.worker_problem)
    if story.copy_on_worker is None:
        return WorkerView(worker)
    mine = [e for e in story.events if e.source == worker]
    return WorkerView(worker, story.copy_on_worker, story.pods, mine)


def cmd_logs(clusters: Clusters, args: argparse.Namespace) -> str:
    tj = _trainjob(clusters, args.name)
    if tj.multikueue and clusters.story_api():
        return _logs_through_the_manager(clusters, args)
    where, api = _where_it_runs(clusters, tj)
    selector = (
        f"{c.REPLICATED_JOB_NAME_LABEL}={args.replicated_job},{c.JOB_COMPLETION_INDEX}={args.node}"
    )
    if args.pod:
        selector = ""  # the pod named, if it is one of the TrainJob's
    try:
        pods = _pods(api, clusters.namespace, args.name, selector)
    except Exception as exc:
        raise PluginError(f"cannot list pods on {where}: {_reason(exc)}") from None
    if args.pod:
        pods = [p for p in pods if p["metadata"]["name"] == args.pod]
    if not pods:
        which = f"named {args.pod}" if args.pod else f"with {selector}"
        raise PluginError(
            f"no pod of TrainJob {args.name} {which} on {where} "
            f"({state_of(tj)}; pods are removed once a finished job is cleaned up)"
        )
    pod = max(pods, key=lambda p: p["metadata"].get("creationTimestamp") or "")
    containers = [x["name"] for x in (pod.get("spec") or {}).get("containers") or []]
    container = args.container or (c.NODE_CONTAINER if c.NODE_CONTAINER in containers else None)
    pod_name = pod["metadata"]["name"]
    try:
        response = client.CoreV1Api(api).read_namespaced_pod_log(
            pod_name,
            clusters.namespace,
            container=container or containers[0],
            follow=args.follow,
            tail_lines=args.tail,
            previous=args.previous,
            since_seconds=args.since,
            timestamps=args.timestamps,
            _preload_content=False,
            _request_timeout=None if args.follow else TIMEOUT,
        )
        for chunk in response.stream(4096):
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
    except Exception as exc:
        raise PluginError(
            f"cannot read the logs of pod {pod_name} on {where}: {_reason(exc)}"
        ) from None
    return ""


def _logs_through_the_manager(clusters: Clusters, args: argparse.Namespace) -> str:
    path = f"{STORY_API}/namespaces/{clusters.namespace}/trainjobs/{args.name}/log"
    try:
        answer = clusters.get(
            path,
            stream=True,
            timeout=None if args.follow else 6 * TIMEOUT,
            node=str(args.node),
            replicatedJob=args.replicated_job,
            container=args.container,
            follow="true" if args.follow else None,
            tailLines=None if args.tail is None else str(args.tail),
            pod=args.pod,
            previous="true" if args.previous else None,
            sinceSeconds=None if args.since is None else str(args.since),
            timestamps="true" if args.timestamps else None,
        )
        for chunk in answer.stream(4096):
            sys.stdout.write(chunk.decode(errors="replace"))
            sys.stdout.flush()
    except Exception as exc:
        raise PluginError(f"cannot read the logs of TrainJob {args.name}: {_reason(exc)}") from None
    return ""


WATCH_SECONDS = 300  # a watch is opened again after this, from where it stopped


def _progress_line(tj: TrainJobView) -> str:
    bar = progress_bar(tj, dt.datetime.now(dt.timezone.utc)) or "no progress reported (yet)"
    return f"{state_of(tj):<9} {bar}"


def _progress_of(tj: TrainJobView) -> Dict:
    return {"state": state_of(tj), "trainerStatus": tj.status.get("trainerStatus")}


def _ended(tj: TrainJobView) -> bool:
    return state_of(tj) == "Complete" or state_of(tj).startswith("Failed")


def cmd_progress(clusters: Clusters, args: argparse.Namespace) -> str:
    """The TrainJob's state and the progress its training reported (status.trainerStatus,
    brought back from its worker); with --watch, a new line at each change until it ends,
    from a watch of that one TrainJob (the API server announces each change)."""
    tj = _trainjob(clusters, args.name)
    if not args.watch:
        return _as(args.output, _progress_of(tj)) if args.output else _progress_line(tj)
    shown = None
    version = tj.resource_version
    while True:
        said = (state_of(tj), tj.status.get("trainerStatus"))
        if said != shown:  # -o json: a JSON object a line; -o yaml: a document each
            if args.output == "json":
                out = json.dumps(_progress_of(tj), default=str)
            elif args.output == "yaml":
                out = "---\n" + _as("yaml", _progress_of(tj))
            else:
                out = _progress_line(tj)
            print(printable(out), flush=True)
            shown = said
        if _ended(tj):
            return ""
        tj, version = _next_version(clusters, args.name, version)


def _next_version(clusters: Clusters, name: str, version: str | None) -> tuple[TrainJobView, str]:
    """The TrainJob's next change, from a watch of it by name that starts at `version`; a
    watch that ends or expires (410) reads it again."""
    stream = watch.Watch().stream(
        clusters.custom().list_namespaced_custom_object,
        c.TRAINER_GROUP,
        c.TRAINER_VERSION,
        clusters.namespace,
        c.TRAINJOB_PLURAL,
        field_selector=f"metadata.name={name}",
        resource_version=version,
        timeout_seconds=WATCH_SECONDS,
        _request_timeout=WATCH_SECONDS + TIMEOUT,
    )
    try:
        for event in stream:
            if event["type"] == "DELETED":
                raise PluginError(f"TrainJob {name} was deleted")
            if event["type"] in ("ADDED", "MODIFIED"):
                tj = TrainJobView(event["object"])
                return tj, str(tj.resource_version or version or "")
    except client.ApiException as exc:
        if exc.status != 410:
            raise PluginError(f"cannot watch TrainJob {name}: {_reason(exc)}") from None
    tj = _trainjob(clusters, name)
    return tj, str(tj.resource_version or "")


def _connection_flags(p: argparse.ArgumentParser, default: Any) -> None:
    """The flags that say how to reach the clusters; `default` is argparse.SUPPRESS where a
    subcommand takes them too (kubectl users put them anywhere), so it does not undo them."""

    def add(*names: str, **kw: Any) -> None:
        p.add_argument(
            *names, **{**kw, "default": kw.get("default") if default is None else default}
        )

    add("--kubeconfig", help="the manager's kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    add("--context", help="the manager's context in it (default: the current one)")
    add("-n", "--namespace", help="default: the context's namespace")
    add(
        "--worker-context",
        action="append",
        metavar="WORKER=CONTEXT",
        help="the context of your kubeconfig that reaches a worker (repeatable)",
    )
    add(
        "--direct",
        action="store_true",
        help="reach the worker yourself, not through the manager's view.trainjob.dev API",
    )
    add(
        "--kueue-namespace",
        default="kueue-system",
        help="where MultiKueueClusters' kubeconfig Secrets live (Kueue's namespace)",
    )


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def duration(text: str) -> int:
    """`--since`: a duration as kubectl reads it (`30s`, `5m`, `1h30m`), in whole seconds."""
    match = _DURATION.fullmatch(text.strip())
    if not text.strip() or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 30s, 5m, 1h30m)")
    hours, minutes, seconds = (int(x or 0) for x in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least one second")
    return total


def _output(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "-o", "--output", choices=["json", "yaml"], help="the object, as kubectl -o prints one"
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kubectl trainjob",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"kubectl-trainjob {version()}")
    _connection_flags(p, None)
    sub = p.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help)
        _connection_flags(cmd, argparse.SUPPRESS)
        return cmd

    ls = command("list", "TrainJobs on the manager, with their worker and state")
    ls.add_argument("-A", "--all-namespaces", action="store_true")
    _output(ls)
    ls.set_defaults(run=cmd_list)
    desc = command("describe", "a TrainJob on the manager and on its worker")
    desc.add_argument("name")
    _output(desc)
    desc.set_defaults(run=cmd_describe)
    logs = command("logs", "a TrainJob's pod logs, from the worker that runs it")
    logs.add_argument("name")
    logs.add_argument("-f", "--follow", action="store_true")
    logs.add_argument("--node", type=int, default=0, help="the node's index (default 0)")
    logs.add_argument("--replicated-job", default=c.NODE_REPLICATED_JOB)
    logs.add_argument("-c", "--container", help=f"default: {c.NODE_CONTAINER}, else the first")
    logs.add_argument("--tail", type=int, help="the last lines only")
    logs.add_argument("--pod", help="this pod of the TrainJob (default: --replicated-job, --node)")
    logs.add_argument(
        "-p", "--previous", action="store_true", help="the container's previous run (restarted)"
    )
    logs.add_argument("--since", type=duration, help="only what came in this last while (5m)")
    logs.add_argument("--timestamps", action="store_true", help="each line's time first")
    logs.set_defaults(run=cmd_logs)
    prog = command("progress", "the progress a TrainJob's training reported, as a bar")
    prog.add_argument("name")
    prog.add_argument("-w", "--watch", action="store_true", help="a line at each change")
    _output(prog)
    prog.set_defaults(run=cmd_progress)
    done = sub.add_parser("completion", help="a shell's completion script for kubectl-trainjob")
    done.add_argument("shell", choices=["bash", "zsh", "tcsh"])
    done.set_defaults(run=cmd_completion, connect=False)
    ui = command("ui", "a read-only web view of TrainJobs and workers, with your identity")
    ui.add_argument("--port", type=int, default=0, help="default 0: a free port")
    ui.add_argument("--address", default="127.0.0.1", help="a loopback address only")
    ui.add_argument(
        "--namespaces",
        help="comma-separated, when you may not list every namespace (default: -n's)",
    )
    ui.add_argument("--no-browser", action="store_true", help="print the address only")
    shared = ui.add_argument_group(
        "behind an authenticating proxy (the chart's ui; docs/users/web-view.md)",
        "no kubeconfig: each request carries the viewer's own bearer token, as the proxy "
        "passes it, and reads the manager with it",
    )
    shared.add_argument("--behind-proxy", action="store_true", help="serve in this mode")
    shared.add_argument(
        "--public-host", help="comma-separated Host names the proxy reaches it by (host:port)"
    )
    shared.add_argument("--server", help="the manager's API (default: the pod's `kubernetes`)")
    shared.add_argument(
        "--certificate-authority", help="its CA (default: the pod's ServiceAccount CA file)"
    )
    ui.set_defaults(run=cmd_ui, connect=False)
    return p


def cmd_completion(_clusters: Clusters | None, args: argparse.Namespace) -> str:
    """A completion script of the commands and flags, for `kubectl-trainjob` (and, through
    kubectl's plugin completion, `kubectl trainjob`)."""
    import shtab

    command = parser()
    command.prog = "kubectl-trainjob"  # the name the shell completes (a function's name)
    script: str = shtab.complete(command, shell=args.shell)
    return script


def cmd_ui(_clusters: Clusters | None, args: argparse.Namespace) -> str:
    from kubectl_trainjob import ui  # the web server's imports, for this command only

    try:
        return ui.run(args)
    except Exception as exc:
        raise PluginError(f"cannot serve the view: {exc}") from None


def _unreachable(exc: BaseException) -> str:
    """The last words of a connection failure: "[Errno 111] Connection refused", not the
    object names urllib3 wraps them in."""
    cause = getattr(exc, "reason", None) or exc
    text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
    return text.rsplit("Failed to establish a new connection: ", 1)[-1][:200]


def _error_line(exc: Exception, clusters: Clusters | None) -> str:
    """What went wrong, in one line and in kubectl's words where kubectl has them."""
    where = clusters.manager.configuration.host if clusters is not None else "its address"
    if isinstance(exc, PluginError):
        return f"error: {exc}"
    if isinstance(exc, client.ApiException):
        if not exc.status:  # the client's own: a TLS failure before any answer
            return f"error: cannot reach the manager at {where}: {_unreachable(exc)}"
        if exc.status == 401:
            return "error: You must be logged in to the server (Unauthorized)"
        try:
            status = json.loads(exc.body or "")
        except (ValueError, RecursionError):  # not the API's Status (a proxy's page, ...)
            status = None
        if isinstance(status, dict) and status.get("kind") == "Status":
            reason = status.get("reason") or exc.reason
            return f"Error from server ({reason}): {status.get('message') or exc.reason}"
        return f"error: the server answered {exc.status} {exc.reason}"
    if isinstance(exc, (urllib3.exceptions.HTTPError, OSError)):
        return f"error: cannot reach the manager at {where}: {_unreachable(exc)}"
    return f"error: {type(exc).__name__}: {str(exc)[:300]} (a bug: please report it)"


ERROR_LINE = 1000  # characters of an error line: a server's message can be anything


def _one_line(text: str) -> str:
    """`text` on one line (a message a server sends may hold newlines), cut to ERROR_LINE."""
    flat = " ".join(text.split())
    return flat if len(flat) <= ERROR_LINE else flat[: ERROR_LINE - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    clusters = None
    try:
        clusters = Clusters(args) if getattr(args, "connect", True) else None
        out = args.run(clusters, args)
    except KeyboardInterrupt:  # Ctrl-C in `logs -f` or `progress -w`: the shell's code
        return 130
    except Exception as exc:
        print(_one_line(printable(_error_line(exc, clusters))), file=sys.stderr)
        return 1
    if out:  # a log is printed as it comes, raw (as kubectl logs prints it); the rest here
        print(printable(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
