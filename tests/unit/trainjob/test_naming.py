"""How a TrainJob's objects are named and the owner they name (trainjob/naming.py): JobSet's
names, so that pods find each other as they would under Trainer."""

from __future__ import annotations

import pytest

from trainjob.naming import (
    MAX_DNS_LABEL,
    job_name,
    name_prefixes,
    owner_name,
    owner_of,
    owner_reference,
    owning_trainjob,
    pod_dns_name,
)
from trainjob_api.views import ObjectView


def test_jobs_and_pods_are_named_as_jobset_names_them() -> None:
    assert job_name("tj", "node", 2) == "tj-node-2"
    assert pod_dns_name("tj", "node", 0, 3) == "tj-node-0-3.tj"  # the Service is the subdomain


@pytest.mark.parametrize(
    ("child", "trainjobs", "owner"),
    [
        ("a-node-0", ["a", "b"], "a"),
        ("a-b-node-0-x7k2p", ["a", "a-b"], "a-b"),  # the longest name that prefixes it
        ("ab-node-0", ["a"], None),  # a prefix only up to a dash
        ("a", ["a"], None),  # the TrainJob's own name is not a child's
        ("c-node-0", ["a", "b"], None),
        ("a-node-0", [], None),
    ],
)
def test_a_child_belongs_to_the_longest_trainjob_name_it_starts_with(
    child: str, trainjobs: list[str], owner: str | None
) -> None:
    assert owning_trainjob(child, trainjobs) == owner


def test_an_owner_reference_names_the_trainjob_as_its_controller() -> None:
    ref = owner_reference("tj", "uid-1")
    assert ref == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "tj",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert owner_reference("tj", "uid-1", controller=False)["controller"] is False
    assert owner_of(ObjectView({"metadata": {"name": "tj", "uid": "uid-1"}})) == ref


@pytest.mark.parametrize(
    ("refs", "kind", "controller", "name"),
    [
        ([owner_reference("tj", "u")], "TrainJob", False, "tj"),
        ([owner_reference("tj", "u", controller=False)], "TrainJob", True, None),
        ([owner_reference("tj", "u", controller=False)], "TrainJob", False, "tj"),
        ([{"kind": "JobSet", "name": "js", "controller": True}], "TrainJob", False, None),
        ([{"kind": "JobSet", "name": "js"}, owner_reference("tj", "u")], "TrainJob", True, "tj"),
        ([{"kind": "JobSet", "name": "js", "controller": True}], "JobSet", True, "js"),
        ([], "TrainJob", False, None),
    ],
)
def test_an_owner_is_named_by_kind_and_if_asked_as_controller(
    refs: list[dict[str, object]], kind: str, controller: bool, name: str | None
) -> None:
    obj = ObjectView({"metadata": {"ownerReferences": refs}})
    assert owner_name(obj, kind, controller=controller) == name
    assert owner_name(None) is None and owner_name(ObjectView({})) is None


@pytest.mark.parametrize(
    "child", ["train-big-node-0-0-x7k2p", "train-node-0-0-x7k2p", "-x-", "nodash", "a--b-"]
)
def test_the_names_a_child_could_be_of_find_what_a_scan_of_all_would(child: str) -> None:
    """The manager looks up each of them for a worker pod's Event, in place of a scan of every
    TrainJob on that worker."""
    names = ["train", "train-big", "trainer", "other", "a", "a-", "-x"]
    kept = [n for n in name_prefixes(child) if n in names]
    assert owning_trainjob(child, kept) == owning_trainjob(child, names)
    assert name_prefixes("a-b-c") == ["a", "a-b"]


def test_the_names_a_child_could_be_of_are_bounded_by_a_dns_label() -> None:
    """Found by a hostile review: an Event's involvedObject name is anyone's to write; a
    megabyte of dashes made a megabyte of names of up to a megabyte each, per Event."""
    assert name_prefixes("-" * 1_000_000) == ["-" * n for n in range(1, MAX_DNS_LABEL + 1)]
    longest = "x" * MAX_DNS_LABEL
    assert name_prefixes(f"{longest}-node-0-0-abcde")[-1] == longest
    assert name_prefixes(f"{longest}x-node-0-0-abcde") == []
