"""Benchmark: what a replica costs before it does any work, run from the product's image: the
CPU and the peak resident memory of a Python process that imports one controller's
application (what every replica loads first), `--repeat` times for each controller.

The image's OCI archive is unpacked with umoci and each process runs in it with chroot (with
/proc mounted), as the image's user and with the image's environment, so it reads exactly the
image's files (its bytecode, or the lack of it). Needs root and umoci. Figures: median
(min-max) over the repeats.

    .venv/bin/python benchmarks/image_start.py [--archive PATH] [--repeat 7]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from clusters import images
from release import image_contents

MODULES = ("dispatcher.app", "worker_controller.app")

# Run in the image: the whole process's CPU (the interpreter's start included) and its peak
# RSS (VmHWM: ru_maxrss would carry the peak of the process that started it across exec).
PROBE = (
    "import importlib, json, resource, sys; importlib.import_module(sys.argv[1]); "
    "u = resource.getrusage(resource.RUSAGE_SELF); "
    "hwm = next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')); "
    "print(json.dumps({'cpu_s': u.ru_utime + u.ru_stime, 'peak_kib': int(hwm.split()[1])}))"
)


def unpack(archive: Path, work: Path) -> Path:
    """The image's root filesystem, unpacked under `work`."""
    layout = work / "layout"
    with tarfile.open(archive) as tar:
        tar.extractall(layout, filter="tar")
    index = json.loads((layout / "index.json").read_text())
    ref = index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:{ref}", str(work / "bundle")],
        check=True,
        capture_output=True,
    )
    return work / "bundle" / "rootfs"


# Found on this host's PATH (the processes get the image's, which may not name /usr/sbin).
CHROOT = shutil.which("chroot") or "/usr/sbin/chroot"


def run_once(rootfs: Path, user: str, env: dict[str, str], module: str) -> dict[str, float]:
    done = subprocess.run(
        [CHROOT, f"--userspec={user}", str(rootfs), "python3", "-c", PROBE, module],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def spread(values: list[float], unit: str) -> str:
    return f"{statistics.median(values):.2f} {unit} ({min(values):.2f}-{max(values):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--archive",
        type=Path,
        help="an OCI archive (default: the bed's image of this checkout, built if need be)",
    )
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    archive = args.archive
    if archive is None:
        images.build(images.PRODUCT)  # the bed's, from this checkout (cached)
        archive = images.archive(images.PRODUCT)
    config = image_contents.config(archive)["config"]
    env = dict(item.split("=", 1) for item in config.get("Env", []))
    with tempfile.TemporaryDirectory(prefix="image-start.") as work:
        rootfs = unpack(archive, Path(work))
        print(f"{archive}: user {config['User']}, environment {env}")
        subprocess.run(["mount", "-t", "proc", "proc", str(rootfs / "proc")], check=True)
        try:
            for module in MODULES:
                runs = [run_once(rootfs, config["User"], env, module) for _ in range(args.repeat)]
                print(
                    f"import {module}: CPU {spread([r['cpu_s'] for r in runs], 's')}, peak RSS "
                    f"{spread([r['peak_kib'] / 1024 for r in runs], 'MiB')} ({args.repeat} runs)"
                )
        finally:
            subprocess.run(["umount", str(rootfs / "proc")], check=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
