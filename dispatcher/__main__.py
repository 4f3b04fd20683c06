"""`python -m dispatcher`: the MultiKueue admission-check controller for TrainJobs (manager)."""

from __future__ import annotations

import sys

from kubecontrol.client import keep_kubernetes_client_out


def main(argv: list[str] | None = None) -> int:
    # Before the app is imported: nothing it loads may bring in the kubernetes client.
    keep_kubernetes_client_out()
    from dispatcher.app import main as run

    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
