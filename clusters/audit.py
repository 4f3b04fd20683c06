"""The bed's API-server audit logs, read back: which of the product's identities sent what.

Each bed API server audits, at Metadata level, every request from the ServiceAccounts of the
product's namespace (our controllers, and the manager's identity on the workers; see
`clusters.bed.AUDIT_POLICY`). The server's own record, not the client's: the takeover test
counts a standby's writes by token, the benchmarks count requests per TrainJob per cluster.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"


@dataclass(frozen=True)
class Request:
    received: dt.datetime
    user: str  # e.g. system:serviceaccount:trainjob-system:trainjob-dispatcher
    credentials: tuple[str, ...]  # e.g. ("JTI=...",): one token of that user
    verb: str  # the API verb: get, list, watch, create, update, patch, delete, ...
    resource: str  # plural; "trainjobs/status" for a subresource; "" for non-resource URLs
    namespace: str = ""  # of the object (or collection) asked for
    name: str = ""  # of the object asked for ("" for a list, a watch or a create)
    code: int = 0  # the HTTP status of the response
    uri: str = ""  # the request's path and query, as the server received them

    @property
    def writes(self) -> bool:
        return self.verb in WRITE_VERBS


def requests(log_dir: Path, since: dt.datetime | None = None) -> Iterator[Request]:
    """The audited requests of one API server (its log, the rotated one first) received at
    or after `since`, one per request (a watch is counted when it starts)."""
    logs = sorted(log_dir.glob("audit*.log"), key=lambda p: (p.name == "audit.log", p.name))
    for log in logs:
        with log.open() as f:
            for line in f:
                event = json.loads(line)
                if event.get("stage") == "ResponseComplete" and event.get("verb") == "watch":
                    continue  # counted once, when it started
                received = dt.datetime.fromisoformat(event["requestReceivedTimestamp"])
                if since is not None and received < since:
                    continue
                user = event.get("user") or {}
                ref = event.get("objectRef") or {}
                resource = ref.get("resource", "")
                if ref.get("subresource"):
                    resource = f"{resource}/{ref['subresource']}"
                yield Request(
                    received=received,
                    user=user.get("username", ""),
                    credentials=tuple((user.get("extra") or {}).get(CREDENTIAL_ID, [])),
                    verb=event.get("verb", ""),
                    resource=resource,
                    namespace=ref.get("namespace", ""),
                    name=ref.get("name", ""),
                    code=int((event.get("responseStatus") or {}).get("code") or 0),
                    uri=event.get("requestURI", ""),
                )
