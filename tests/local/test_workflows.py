"""The release workflow (.github/workflows) passes actionlint, and builds what ./run image does."""

from __future__ import annotations

import subprocess

import yaml

from clusters import builds
from tests.support.files import REPO_ROOT

WORKFLOWS = REPO_ROOT / ".github" / "workflows"


def test_the_workflows_pass_actionlint() -> None:
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert files
    done = subprocess.run(
        [str(builds.binary("actionlint")), "-no-color", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_release_builds_the_dockerfile_for_both_machines_with_sbom_and_provenance() -> None:
    release = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    steps = release["jobs"]["image"]["steps"]
    (build,) = [s for s in steps if s.get("uses", "").startswith("docker/build-push-action")]
    assert build["with"]["context"] == "."  # the repository's Dockerfile, as ./run image
    assert build["with"]["platforms"] == "linux/amd64,linux/arm64"
    assert build["with"]["sbom"] is True and build["with"]["provenance"] == "mode=max"
    # The lock has a wheel hash for each machine the release builds for.
    lock = (REPO_ROOT / "deploy/image/requirements.lock").read_text()
    assert "aarch64" in lock.splitlines()[1]
    assert release[True]["push"]["tags"] == ["v*.*.*"]  # YAML 1.1 reads `on` as True
