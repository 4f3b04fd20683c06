"""The metrics endpoint's callers (kubecontrol/metrics_auth.py): a caller's token is reviewed
on its namespace's budget, so a tenant minting tokens cannot hold the scraper's out."""

from __future__ import annotations

from kubecontrol.metrics_auth import MetricsAuth
from kubecontrol.tokens import Reviews, Verdict


def test_metrics_callers_tokens_spend_their_namespaces_budget() -> None:
    """The review's N9: every signed ServiceAccount token of the cluster shared one budget,
    so a tenant minting its own tokens kept the scraper's new one waiting (429, scrape gaps,
    a false no-leader alert)."""

    class Keys:
        def verify(self, token: str) -> object:
            ns, sa = token.split("/")  # a tenant mints a new ServiceAccount for each token
            return {"sub": f"system:serviceaccount:{ns}:sa-{sa}"} if ns != "forged" else "bad"

    class Reviewed(MetricsAuth):
        def _review(self, token: str) -> Verdict:
            return Verdict(200, "allowed")

    auth = Reviewed(None, Reviews(reviews_per_second=0.001, burst=3), Keys())  # type: ignore[arg-type]
    tenant = [auth.check(f"Bearer team-a/{i}").code for i in range(10)]
    assert tenant == [200] * 3 + [429] * 7
    assert auth.check("Bearer monitoring/new").code == 200  # the scraper's own budget
    assert [auth.check(f"Bearer forged/{i}").code for i in range(5)] == [200] * 3 + [429] * 2
