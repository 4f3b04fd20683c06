"""The web view (`kubectl trainjob ui`) in a real browser, headless Debian Chromium, against
the kwok bed: a running TrainJob with its worker and a progress bar that moves as its pod
reports, one TrainJob's story, what a viewer without rights to a namespace sees, and a worker
outage on the clusters view. kwok pods write no logs: the log pane is driven on real nodes
(tests/real/test_real_nodes.py)."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client
from playwright.sync_api import Page, expect

from clusters import setup
from clusters.bed import Bed
from clusters.helpers.browser import accessibility_problems, page_of, screenshot, view_server
from clusters.helpers.tenant import API, Tenant
from clusters.helpers.waiting import wait_for
from tests.support.multikueue import MultiKueue
from tests.support.reporting import progress_interval, report, reporting

pytestmark = [pytest.mark.bed, pytest.mark.usefixtures("controllers")]
SECONDS = 15_000  # ms a page has to show what the API says (the targets are in benchmarks/)


def row(page: Page, ns: str, name: str) -> object:
    return page.locator(f'tr[data-key="{ns}/{name}"]')


def test_a_running_trainjob_shows_its_worker_and_a_moving_progress_bar(
    bed: Bed, controllers: list[setup.Controller]
) -> None:
    mk = MultiKueue(bed)
    mk.submit("waiting", run="300s", queue="no-such-queue")  # admitted nowhere: queued
    on = reporting(mk, controllers, "shown")
    with view_server(bed.kubeconfig(mk.manager)) as url, page_of(url) as page:
        shown = page.locator(f'tr[data-key="{mk.ns}/shown"]')
        expect(shown.locator("td.worker")).to_have_text(on.worker, timeout=SECONDS)
        expect(shown.locator("td.state")).to_have_text("Running")
        expect(page.locator(f'tr[data-key="{mk.ns}/waiting"] td.state')).to_have_text("Queued")

        code, said = on.reporter.post(on.path, report(30, estimatedRemainingSeconds=600), on.token)
        assert code == 200, said
        bar = shown.locator("progress")
        expect(bar).to_have_attribute("value", "30", timeout=SECONDS)
        expect(shown).to_contain_text("10m00s left")
        time.sleep(progress_interval() + 0.5)  # the worker writes one report per interval
        metrics = [{"name": "loss", "value": "0.9"}]
        code, said = on.reporter.post(on.path, report(55, metrics=metrics), on.token)
        assert code == 200, said
        expect(bar).to_have_attribute("value", "55", timeout=SECONDS)

        # filter and sort, with the keyboard
        page.locator("#filter").fill(f"queued {mk.ns}")
        expect(page.locator("#trainjobs tr")).to_have_count(1)
        page.locator("#filter").fill("")
        page.get_by_role("button", name="Name", exact=True).press("Enter")
        names = page.locator("#trainjobs th").all_inner_texts()
        assert names == sorted(names), names
        screenshot(page, "trainjobs")
        assert accessibility_problems(page) == []

        # one TrainJob: its facts, conditions, where it runs, the chart of its reports
        shown.get_by_role("link", name="shown").click()
        expect(page.locator("#worker")).to_have_text(on.worker, timeout=SECONDS)
        expect(page.locator("#timeline")).to_contain_text(on.worker, timeout=SECONDS)
        expect(page.locator("#pods")).to_contain_text("shown-node-0")
        expect(page.locator("#events")).to_contain_text("manager")
        time.sleep(progress_interval() + 0.5)
        code, said = on.reporter.post(
            on.path, report(70, metrics=[{"name": "loss", "value": "0.5"}]), on.token
        )
        assert code == 200, said
        expect(page.locator("#chart")).to_contain_text("loss = 0.5", timeout=SECONDS)
        expect(page.locator("#chart svg polyline")).to_have_count(2)  # progress and loss
        screenshot(page, "trainjob")
        assert accessibility_problems(page) == []


def test_a_viewer_sees_only_the_namespaces_rbac_lets_them_read(
    bed: Bed, controllers: list[setup.Controller], tmp_path: Path
) -> None:
    mine, theirs = MultiKueue(bed), MultiKueue(bed)
    mine.submit("mine", run="300s")
    theirs.submit("theirs", run="300s")
    viewer = Tenant(bed, mine.ns, "viewer", "view", tmp_path)
    namespaces = f"{mine.ns},{theirs.ns}"
    with view_server(viewer.kubeconfig, "--namespaces", namespaces) as url, page_of(url) as page:
        expect(row(page, mine.ns, "mine")).to_be_visible(timeout=SECONDS)  # type: ignore[attr-defined]
        expect(page.locator("#problems")).to_contain_text(f"TrainJobs in {theirs.ns}: 403")
        expect(page.locator("#trainjobs tr")).to_have_count(1)
        assert page.locator(f'tr[data-key="{theirs.ns}/theirs"]').count() == 0
        # the server passes on nothing but reads of its allow-list, whatever the page asks
        for path in (
            "/k8s/api/v1/secrets",
            f"/k8s/api/v1/namespaces/{mine.ns}/pods",
            "/watch?p=/api/v1/secrets%3Fwatch%3D1",
        ):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url.rstrip("/") + path, timeout=10)
            assert refused.value.code == 403
        request = urllib.request.Request(
            url + "k8s/apis/trainer.kubeflow.org/v1alpha1/trainjobs",
            headers={"Host": "attacker.example:80"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403
        # the clusters' view says what this viewer may not read, and nothing else
        page.get_by_role("link", name="Clusters").click()
        expect(page.locator("#workers")).to_contain_text(
            "You may not list MultiKueueClusters", timeout=SECONDS
        )
        assert viewer.get(f"{API}/workers")[0] == 403
        # bound cluster-wide to the chart's clusters-view role, the same viewer sees them
        rbac = client.RbacAuthorizationV1Api(bed.api(mine.manager))
        binding = f"{mine.ns}-clusters-view"
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": binding},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "trainjob-dispatcher-clusters-view",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "viewer", "namespace": mine.ns}],
            }
        )
        try:
            _, listed = wait_for(
                lambda: (found := viewer.get(f"{API}/workers"))[0] == 200 and found,
                15,
                what="the workers' list for the viewer",
            )
            assert [w["metadata"]["name"] for w in listed["items"]] == sorted(mine.workers)
            assert all(w["connection"] == "Connected" for w in listed["items"]), listed
            page.reload()
            for worker in mine.workers:
                card = page.locator(f'section[data-worker="{worker}"]')
                expect(card.locator("table.cq")).to_be_visible(timeout=SECONDS)
        finally:
            rbac.delete_cluster_role_binding(binding)


def test_a_worker_outage_shows_on_the_clusters_view(bed: Bed, worker_names: list[str]) -> None:
    mk = MultiKueue(bed)
    mk.submit("placed", run="300s")
    worker = mk.started_on("placed")
    with view_server(bed.kubeconfig(mk.manager)) as url, page_of(url + "#/clusters") as page:
        card = page.locator(f'section[data-worker="{worker}"]')
        expect(card.locator("[data-connection]")).to_have_attribute(
            "data-connection", "up", timeout=SECONDS
        )
        expect(card).to_contain_text("TrainJob")
        expect(card.locator("table.cq progress").first).to_be_visible(timeout=SECONDS)
        expect(card).to_contain_text("reserved")
        screenshot(page, "clusters", full_page=False)
        assert accessibility_problems(page) == []
        bed.stop_component(worker, "kube-apiserver")
        try:
            expect(card.locator("[data-connection]")).to_have_attribute(
                "data-connection", "down", timeout=90_000
            )
            expect(card).to_contain_text("ClientConnectionFailed")
            screenshot(page, "clusters-outage", full_page=False)
        finally:
            bed.restore_api_server(worker)
        expect(card.locator("[data-connection]")).to_have_attribute(
            "data-connection", "up", timeout=90_000
        )


def test_behind_a_proxy_each_viewer_reads_with_their_own_token(
    bed: Bed, controllers: list[setup.Controller], tmp_path: Path
) -> None:
    """`kubectl trainjob ui --behind-proxy`, as the chart runs it for a platform's
    authenticating proxy: no kubeconfig, no credential; each request carries the viewer's
    own token, as the proxy adds it, and RBAC on the manager decides."""
    mine, theirs = MultiKueue(bed), MultiKueue(bed)
    mine.submit("mine", run="300s")
    theirs.submit("theirs", run="300s")
    viewer = Tenant(bed, mine.ns, "viewer", "view", tmp_path)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    flags = ["--behind-proxy", "--port", str(port), "--public-host", f"127.0.0.1:{port}",
             "--server", bed.server(mine.manager),
             "--certificate-authority", str(bed.pki_dir / "ca.crt")]  # fmt: skip
    trainjobs = "k8s/apis/trainer.kubeflow.org/v1alpha1/namespaces/{}/trainjobs"

    def status(url: str, token: str | None) -> int:
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=auth), timeout=10):
                return 200
        except urllib.error.HTTPError as exc:
            return exc.code

    with view_server(None, *flags) as url:
        assert status(url + trainjobs.format(mine.ns), None) == 401
        assert status(url + trainjobs.format(mine.ns), viewer.token) == 200
        assert status(url + trainjobs.format(theirs.ns), viewer.token) == 403
        assert status(url + trainjobs.format(mine.ns), "not-a-token") == 401  # the manager's
        headers = {"Authorization": f"Bearer {viewer.token}"}
        address = f"{url}?namespaces={mine.ns},{theirs.ns}"
        with page_of(address, headers=headers) as page:
            expect(row(page, mine.ns, "mine")).to_be_visible(timeout=SECONDS)  # type: ignore[attr-defined]
            expect(page.locator("#problems")).to_contain_text(f"TrainJobs in {theirs.ns}: 403")
            expect(page.locator("#session")).to_contain_text(f"{mine.ns}, {theirs.ns}")
        with page_of(url) as page:  # the proxy passed no token: the page says so
            expect(page.locator("#problems")).to_contain_text("authenticating proxy")
