"""The job story API's capacity, shared per user and per namespace: one tenant holding every
read it may never keeps another tenant's read out."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson

from dispatcher import job_story
from kubecontrol.aggregated import ApiRequest, Caller


def call(user: str, namespace: str) -> ApiRequest:
    return ApiRequest(namespace, "tj", "story", Caller(user), {}, http=None)  # type: ignore[arg-type]


def test_one_user_meets_its_share_of_reads_and_others_still_read() -> None:
    """Before: 8 reads per replica for everyone, so 8 of one tenant's left every other
    tenant 429."""
    release = threading.Event()

    def held() -> str:
        release.wait(10)
        return "read"

    async def scenario() -> dict[str, Any]:
        mallory = [
            asyncio.create_task(job_story._read(call(f"mallory-{i % 2}", "evil"), held))
            for i in range(job_story.READS_PER_NAMESPACE)
        ]
        await asyncio.sleep(0.2)  # all of them hold a slot
        answers = {
            "mallory-0 again": await job_story._read(call("mallory-0", "evil"), held),
            "a new user of her namespace": await job_story._read(call("sa-9", "evil"), held),
        }
        alice = asyncio.create_task(job_story._read(call("alice", "team-a"), lambda: "alice's"))
        answers["alice"] = await asyncio.wait_for(alice, 5)
        release.set()
        answers["mallory's"] = await asyncio.gather(*mallory)
        return answers

    answers = asyncio.run(scenario())
    assert answers["alice"] == "alice's"
    assert answers["mallory's"] == ["read"] * job_story.READS_PER_NAMESPACE
    for who, share in (("mallory-0 again", "your share"), ("a new user of her namespace", "evil")):
        answer = answers[who]
        assert answer.status == 429 and answer.headers["Retry-After"] == "1"
        assert share in orjson.loads(answer.body)["message"], answer.body
    assert job_story._reads_slots.held("mallory-0") == 0  # every slot given back
