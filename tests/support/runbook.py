"""The runbooks as tests run them: a page's bash blocks, run in order with the bed's admin
kubeconfigs merged (a context per cluster), and the clean-up of what docs/operators/install.md
makes."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import yaml
from kubernetes import client

from clusters.bed import Bed
from clusters.config import REPO_ROOT

FENCE = re.compile(r"^```(\S*)([^\n]*)\n(.*?)^```$", re.M | re.S)


def shell_blocks(
    markdown: str, section: str | None = None, subsection: str | None = None
) -> list[str]:
    """The page's bash blocks in order (those under the `## <section>` heading only, when
    given, and of its `### <subsection>` only, when given). A page fences what it shows but a
    reader runs another way (`sh`: a choice, an example to adapt) otherwise: never run."""
    if section is not None:
        start = markdown.index(f"\n## {section}\n")
        end = markdown.find("\n## ", start + 1)
        markdown = markdown[start : end if end != -1 else None]
    if subsection is not None:
        head = markdown.index(f"\n### {subsection}\n")
        cut = markdown.find("\n### ", head + 1)
        markdown = markdown[head : cut if cut != -1 else None]
    return [
        body for lang, info, body in FENCE.findall(markdown) if lang == "bash" and not info.strip()
    ]


def merged_kubeconfig(bed: Bed, out: Path) -> Path:
    """The bed's admin kubeconfigs as one file, a context per cluster named after it."""
    merged: dict[str, list[dict[str, object]]] = {"clusters": [], "users": [], "contexts": []}
    for c in bed.config.clusters:
        cfg = yaml.safe_load(bed.kubeconfig(c.name).read_text())
        merged["clusters"].append({"name": c.name, "cluster": cfg["clusters"][0]["cluster"]})
        merged["users"].append({"name": c.name, "user": cfg["users"][0]["user"]})
        merged["contexts"].append({"name": c.name, "context": {"cluster": c.name, "user": c.name}})
    out.write_text(
        yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Config", "current-context": "manager", **merged}
        )
    )
    out.chmod(0o600)
    return out


def run_blocks(blocks: list[str], env: dict[str, str], what: str, cwd: Path = REPO_ROOT) -> float:
    start = time.monotonic()
    for number, block in enumerate(blocks, 1):
        began = time.monotonic()
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        print(
            f"--- {what} block {number}/{len(blocks)} ({time.monotonic() - began:.1f} s)\n"
            f"{done.stdout}{done.stderr}",
            file=sys.stderr,
        )
        assert done.returncode == 0, (
            f"{what}, block {number} failed (exit {done.returncode}):\n{block}\n"
            f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        )
    return time.monotonic() - start


def clean_up(bed: Bed) -> None:
    """What the runbook made, so the other tests install the product their own way."""
    custom = client.CustomObjectsApi(bed.api("manager"))
    # The dispatcher is gone: its finalizer on each TrainJob goes by hand (operations.md), or
    # the namespace, and a later test's deletion of the CRDs, would wait for it for ever.
    group, version = "trainer.kubeflow.org", "v1alpha1"
    try:
        found = custom.list_namespaced_custom_object(group, version, "team-a", "trainjobs")
    except client.ApiException as exc:
        if exc.status != 404:  # a run that stopped before the CRDs were there
            raise
        found = {"items": []}
    for trainjob in found["items"]:
        try:
            custom.patch_namespaced_custom_object(
                group, version, "team-a", "trainjobs", trainjob["metadata"]["name"],
                {"metadata": {"finalizers": None}},
            )  # fmt: skip
        except client.ApiException as exc:
            if exc.status != 404:
                raise
    for cluster in bed.config.clusters:
        api = bed.api(cluster.name)
        try:
            client.CoreV1Api(api).delete_namespace("team-a")
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        for group, version, plural, name in (
            ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "install-check"),
            ("kueue.x-k8s.io", "v1beta2", "clusterqueues", "cluster-queue"),
            ("kueue.x-k8s.io", "v1beta2", "admissionchecks", "multikueue"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueconfigs", "multikueue"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueclusters", "worker1"),
            ("kueue.x-k8s.io", "v1beta2", "multikueueclusters", "worker2"),
        ):
            try:
                client.CustomObjectsApi(api).delete_cluster_custom_object(
                    group, version, plural, name
                )
            except client.ApiException as exc:
                if exc.status != 404:
                    raise
