"""The PodGroup CRDs of the two gang schedulers Kubeflow Trainer supports, for a bed worker
(the schedulers themselves do not run on the bed; the worker controller only makes the
groups, and its tests read them back through the API server, whose schema checks them):

- the scheduler-plugins' `podgroups.scheduling.x-k8s.io`, from that project's Go module;
- Volcano's `podgroups.scheduling.volcano.sh`, written by controller-gen from the API types
  Trainer v2.3 builds against (`volcano.sh/apis`), as Volcano's own build writes it (Volcano's
  repository is not a Go module the proxy serves).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from clusters import builds
from clusters.errors import BedError

VOLCANO_TYPES = "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
NAMES = ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh")


def coscheduling_crd() -> dict[str, Any]:
    module = f"sigs.k8s.io/scheduler-plugins@{builds.SCHEDULER_PLUGINS_VERSION}"
    source = builds.module_source_dir("crdgen", module)
    path = source / "config" / "crd" / "bases" / "scheduling.x-k8s.io_podgroups.yaml"
    crd: dict[str, Any] = yaml.safe_load(path.read_text())
    return crd


def volcano_crd() -> dict[str, Any]:
    build = builds.BUILDS["crdgen"]
    builds.build_one(build)
    out = builds.cache_root() / "crds" / build.key()
    path = out / "scheduling.volcano.sh_podgroups.yaml"
    if not path.is_file():
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        done = subprocess.run(
            [
                str(builds.binary_dir(build) / "controller-gen"),
                "crd",
                f"paths={VOLCANO_TYPES}",
                f"output:crd:dir={tmp}",
            ],
            cwd=build.module_dir,
            capture_output=True,
            text=True,
            env=builds.go_env(),
        )
        if done.returncode != 0 or not (tmp / path.name).is_file():
            raise BedError(f"controller-gen could not write Volcano's CRDs: {done.stderr[-2000:]}")
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
    crd: dict[str, Any] = yaml.safe_load(Path(path).read_text())
    return crd


def crds() -> list[dict[str, Any]]:
    return [coscheduling_crd(), volcano_crd()]
