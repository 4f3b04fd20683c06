"""Token verdicts kept a while, and new tokens reviewed at a bounded rate per budget."""

from __future__ import annotations

from kubecontrol.tokens import TOO_MANY, Reviews, Verdict


def test_one_budget_spent_leaves_the_others_whole() -> None:
    """Before: one bucket for everyone; one namespace's new tokens took every review."""
    reviews = Reviews(reviews_per_second=0.001, burst=3)
    asked: list[str] = []

    def review(token: str) -> Verdict:
        asked.append(token)
        return Verdict(200, "ok")

    for i in range(10):
        reviews.check(f"evil-{i}", review=lambda i=i: review(f"evil-{i}"), budget="evil")
    assert asked == ["evil-0", "evil-1", "evil-2"]
    assert reviews.check("alice", review=lambda: review("alice"), budget="team-a") == Verdict(
        200, "ok"
    )
    assert reviews.check("evil-9", review=lambda: review("x"), budget="evil") == TOO_MANY


def test_a_kept_verdict_costs_no_review_and_stays_while_used() -> None:
    reviews = Reviews(size=2, reviews_per_second=1000, burst=1000)
    count = 0

    def review() -> Verdict:
        nonlocal count
        count += 1
        return Verdict(200, "ok")

    reviews.check("used", review=review)
    for i in range(5):  # newer tokens, and the used one asked in between: it is kept
        reviews.check(f"other-{i}", review=review)
        reviews.check("used", review=review)
    assert count == 6


def test_a_budget_is_named_only_when_a_review_is_due() -> None:
    """A scraper's token kept a minute costs no signature check on each scrape."""
    reviews = Reviews()
    asked: list[str] = []

    def budget() -> str:
        asked.append("budget")
        return "serviceaccount"

    for _ in range(3):
        assert reviews.check("t", review=lambda: Verdict(200, "ok"), budget=budget).code == 200
    assert asked == ["budget"]


def test_a_new_budget_each_time_still_meets_the_total() -> None:
    """The review's N8: with the cluster's keys unreadable, forged reports naming a new
    namespace each asked one TokenReview each (10,000 for 10,000), with no bound in all."""
    reviews = Reviews(reviews_per_second=0.001, burst=5, total_per_second=0.001, total_burst=20)
    asked: list[str] = []

    def review(token: str) -> Verdict:
        asked.append(token)
        return Verdict(401, "forged")

    verdicts = [
        reviews.check(f"t-{i}", review=lambda i=i: review(f"t-{i}"), budget=f"ns-{i}")
        for i in range(1000)
    ]
    assert len(asked) == 20
    assert verdicts[20:] == [TOO_MANY] * 980
    # The per-namespace budget is spent first: one namespace's flood takes only its burst of
    # the total, and another's new token still goes through.
    reviews = Reviews(reviews_per_second=0.001, burst=5, total_per_second=0.001, total_burst=20)
    flood = [
        reviews.check(f"e-{i}", review=lambda: Verdict(401, "no"), budget="evil")
        for i in range(100)
    ]
    assert flood[5:] == [TOO_MANY] * 95
    assert reviews.check("alice", review=lambda: Verdict(200, "ok"), budget="team-a").code == 200
