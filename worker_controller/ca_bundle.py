"""The CA that signs the worker controller's serving certificate, as its TrainJobs' pods are
given it to trust (worker_controller/progress.py)."""

from __future__ import annotations

import threading

from trainjob import progress
from worker_controller.settings import WorkerSettings


class CaBundle:
    """The PEM of the CA that signs the serving certificate, as the pods are to trust it:
    `ca.crt` beside the certificate (this controller's own, or one a cert-manager Secret
    mounts), read again when the file changes."""

    def __init__(self, settings: WorkerSettings) -> None:
        files = settings.webhook_files
        self._path = files[0].parent / progress.CA_FILE if files else None
        self._seen: tuple[float, str] | None = None
        self._lock = threading.Lock()

    def pem(self) -> str | None:
        if self._path is None:
            return None
        try:
            mtime = self._path.stat().st_mtime
        except OSError:
            return None
        with self._lock:
            if self._seen is None or self._seen[0] != mtime:
                self._seen = (mtime, self._path.read_text())
            return self._seen[1]
