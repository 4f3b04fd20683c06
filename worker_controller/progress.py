"""Kubeflow Trainer's TrainJobStatus server, served by the worker controller: a TrainJob's
pods POST their progress (trainjob/progress.py: Trainer's path, token audience and payload)
and it becomes the TrainJob's `status.trainerStatus`; on a MultiKueue worker the dispatcher
brings it back to the manager's TrainJob with the rest of the status.

Every replica serves it, on a port of its own (`progressPort`) with the webhooks' certificate
(the Service spreads the pods' reports over the replicas): the port the pods are told to call
serves no admission. The webhook port takes reports too, for pods given its address by a
version without the progress port (their jobs keep reporting across an upgrade). A report goes
through, in this order:
1. its size (413 beyond 64 KiB) and, read from the token itself without asking anyone, that
   the token is a JWT, not expired, and for this TrainJob's audience (401, 403);
2. the token's signature, checked here against the keys the API server publishes for its
   ServiceAccount tokens (kubecontrol/issuer_keys.py; 401): a forged token costs one
   signature check and no API request;
3. the TrainJob, in this controller's cache (404 when there is none);
4. the API server's TokenReview of the token for that audience (401 when it is not valid,
   403 when its ServiceAccount is of another namespace), the verdict kept a minute, new
   tokens reviewed at a bounded rate per namespace (429 beyond);
5. the payload (400 not JSON, 422 a field out of Trainer's schema, named);
6. the throttle: at most one status write per TrainJob per `progressIntervalSeconds`, and a
   bounded rate for all of a namespace's; a report that comes sooner is answered 200 and
   written at its turn, replaced by any newer one.
"""

from __future__ import annotations

import asyncio
import logging
import time

import orjson

from kubebase.objects import Dict
from kubecontrol import controller, web
from kubecontrol.aggregated import status as error
from kubecontrol.client import ApiException
from kubecontrol.issuer_keys import IssuerKeys
from kubecontrol.tokens import Reviews, Verdict, bearer, token_review
from trainjob import progress
from trainjob_api import constants as c
from worker_controller import metrics
from worker_controller.context import Context
from worker_controller.execute import api_message
from worker_controller.settings import WorkerSettings

log = logging.getLogger("worker_controller.progress")
READ_SECONDS = 10.0
# New tokens reviewed in all, whatever their namespaces: four namespaces' worth at once.
TOTAL_REVIEWS_PER_SECOND, TOTAL_REVIEW_BURST = 20.0, 80
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"


def base_url(settings: WorkerSettings) -> str | None:
    """Where the pods reach this server: `progressUrl`, else the webhook Service's name, at
    the progress port (the chart's Service serves it at the same number), else at the
    webhook's 443."""
    if settings.progress_url:
        return settings.progress_url.rstrip("/")
    if settings.webhook_service and settings.webhook_port:
        port = settings.progress_port or 443
        return f"https://{settings.webhook_service}.{controller.own_namespace()}.svc:{port}"
    return None


class StatusServer:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._cluster = ctx.cluster.ungated()  # every replica writes the reports it takes
        self._throttle = progress.Throttle(ctx.settings.progress_interval_seconds)
        # Per namespace: one tenant's new tokens never use up another's reviews; and in all,
        # for the cluster whose keys cannot be read here (then every report is reviewed, and
        # a forger could name a new namespace each time).
        self._reviews = Reviews(
            ttl=60.0,
            size=4096,
            reviews_per_second=5.0,
            burst=20,
            total_per_second=TOTAL_REVIEWS_PER_SECOND,
            total_burst=TOTAL_REVIEW_BURST,
        )
        self._keys = IssuerKeys(self._cluster)

    def routes(self) -> list[web.RouteDef]:
        return [web.post(progress.status_path("{namespace}", "{name}"), self._counted)]

    async def _counted(self, request: web.Request) -> web.StreamResponse:
        answer = await self._report(request)
        metrics.PROGRESS_REPORTS.labels(str(answer.status)).inc()
        return answer

    async def _report(self, request: web.Request) -> web.StreamResponse:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if (request.content_length or 0) > progress.MAX_REPORT_BYTES:
            return error(413, f"a report is at most {progress.MAX_REPORT_BYTES} bytes")
        try:
            body = await asyncio.wait_for(_body(request, progress.MAX_REPORT_BYTES), READ_SECONDS)
        except TimeoutError:
            return error(408, "the report came too slowly", "Timeout")
        if len(body) > progress.MAX_REPORT_BYTES:  # a chunked one, with no length said
            return error(413, f"a report is at most {progress.MAX_REPORT_BYTES} bytes")
        verdict = _precheck(request.headers.get("Authorization"), namespace, name)
        if verdict is None:
            verdict = await asyncio.to_thread(self._signed, request, namespace)
        if verdict is not None and verdict.code != 200:
            return error(verdict.code, verdict.reason)
        # Signed (or this cluster's keys not readable here) by a ServiceAccount of the
        # namespace: whether its TrainJob is here is no secret to it, and asks nothing.
        if verdict is not None and self._ctx.caches.trainjob(namespace, name) is None:
            return error(404, f"no TrainJob {namespace}/{name} on this cluster")
        verdict = await asyncio.to_thread(self._review, request, namespace, name)
        if verdict.code != 200:
            return error(verdict.code, verdict.reason)
        if self._ctx.caches.trainjob(namespace, name) is None:
            return error(404, f"no TrainJob {namespace}/{name} on this cluster")
        try:
            report = progress.parse_report(body)
        except progress.BadReport as exc:
            return error(exc.code, exc.message, exc.reason)
        if report is None:  # nothing to write, as Trainer answers it
            return _ok({})
        key = (namespace, name)
        try:
            offer = self._throttle.offer(key, report, time.monotonic())
        except progress.Full as exc:
            return error(429, f"{exc}; try again later")
        if offer.write:
            failed = await asyncio.to_thread(self._write, key, report)
            if failed is not None:
                return failed
        elif offer.flush_in is not None:
            asyncio.get_running_loop().call_later(offer.flush_in, self._flush_soon, key)
        return _ok({"trainerStatus": report})

    def _signed(self, request: web.Request, namespace: str) -> Verdict | None:
        """What the token's signature says: 401 when it is not the API server's, 403 when it
        is a ServiceAccount's of another namespace, 200 when it is one of `namespace`'s;
        None when this cluster's keys cannot be read here (the review decides alone)."""
        said = self._keys.verify(str(bearer(request.headers.get("Authorization"))))
        if said is None:
            return None
        if isinstance(said, str):
            return Verdict(401, said)
        return _namespace_verdict(str(said.get("sub") or ""), namespace)

    def _review(self, request: web.Request, namespace: str, name: str) -> Verdict:
        token = str(bearer(request.headers.get("Authorization")))
        audience = progress.audience(namespace, name)
        return self._reviews.check(
            token,
            audience,
            review=lambda: _token_verdict(self._ctx, token, audience, namespace),
            budget=namespace,
        )

    def _flush_soon(self, key: tuple[str, str]) -> None:
        loop = asyncio.get_running_loop()
        report = self._throttle.take(key, time.monotonic())
        if report is not None:
            loop.run_in_executor(None, self._write, key, report)
        elif self._throttle.holds(key):  # its namespace's writes are spent for now
            loop.call_later(progress.RETRY_SECONDS, self._flush_soon, key)

    def _write(self, key: tuple[str, str], report: progress.TrainerStatus) -> web.Response | None:
        """Write a report; the answer to give when it could not be."""
        namespace, name = key
        try:
            self._cluster.patch(
                c.TRAINJOB, name, namespace, progress.status_patch(report), subresource="status"
            )
            metrics.PROGRESS_WRITES.inc()
            return None
        except ApiException as exc:
            if exc.status in (400, 404, 422):
                return error(exc.status, api_message(exc))
            log.warning(
                "progress not written", extra={"trainjob": f"{namespace}/{name}", "error": str(exc)}
            )
            return error(503, f"cannot write the progress now: {api_message(exc)}")
        except Exception as exc:  # the API server away
            log.warning(
                "progress not written", extra={"trainjob": f"{namespace}/{name}", "error": str(exc)}
            )
            return error(503, f"cannot write the progress now: {type(exc).__name__}")


async def _body(request: web.Request, limit: int) -> bytes:
    """The whole body, however it arrives (in pieces, or chunked), up to `limit` + 1 bytes:
    one read gives only what is buffered."""
    body = bytearray()
    while len(body) <= limit:
        piece = await request.read_some(limit + 1 - len(body))
        if not piece:
            break
        body += piece
    return bytes(body)


def _ok(body: Dict) -> web.Response:
    return web.Response(body=orjson.dumps(body), content_type="application/json")


def _precheck(header: str | None, namespace: str, name: str) -> Verdict | None:
    """A refusal read from the token itself (no signature checked: that is the API server's
    to do), or None when it is worth a TokenReview."""
    token = bearer(header)
    if token is None:
        return Verdict(401, "a bearer token is required (Authorization: Bearer <token>)")
    claims = progress.claims(token)
    if claims is None:
        return Verdict(401, "the bearer token is not a JWT")
    if claims.expires is not None and claims.expires < time.time():
        return Verdict(401, "the token has expired; read the token file again")
    want = progress.audience(namespace, name)
    audiences = claims.audiences
    if want not in audiences:
        shown = ", ".join(audiences[:3]) or "none"
        return Verdict(
            403, f"the token is not for TrainJob {namespace}/{name}: its audience is {shown}"
        )
    return None


def _token_verdict(ctx: Context, token: str, audience: str, namespace: str) -> Verdict:
    try:
        review = token_review(ctx.cluster.ungated(), token, [audience])
    except Exception as exc:  # the API cannot answer now: the pod tries again
        log.warning("a progress report's token not reviewed", extra={"error": str(exc)})
        return Verdict(503, "cannot review the token now; try again")
    if not review.get("authenticated"):
        return Verdict(401, f"the token is not valid: {review.get('error') or 'not authenticated'}")
    return _namespace_verdict(str((review.get("user") or {}).get("username") or ""), namespace)


def _namespace_verdict(user: str, namespace: str) -> Verdict:
    if not user.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"):
        return Verdict(
            403,
            f"{user} may not report for namespace {namespace}: the token must be a "
            "ServiceAccount's of that namespace",
        )
    return Verdict(200, user)
