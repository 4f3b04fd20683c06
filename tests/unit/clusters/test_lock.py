"""The image's lock: what it pins reads back the same, each wheel's hash kept."""

from __future__ import annotations

from release import lock

A, B, C = "a" * 64, "b" * 64, "c" * 64


def test_a_lock_reads_back_with_this_machines_hash_first() -> None:
    locked = {"orjson": ("orjson==3.11.0", B), "pyyaml": ("PyYAML==6.0.3", C)}
    text = lock.lock_text(locked, {"orjson": {A, B}})
    assert (
        "orjson==3.11.0 \\\n    --hash=sha256:" + B + " \\\n    --hash=sha256:" + A + "\n" in text
    )
    assert lock.read_lock(text) == locked
    assert lock.lock_text(lock.read_lock(text), {"orjson": {A}}) == text


def test_the_lock_in_the_repository_pins_every_package_once() -> None:
    text = lock.LOCK.read_text()
    pins = lock.read_lock(text)
    assert len(pins) == text.count("==") and len(pins) > 20
    assert all(lock.canonical(pin.split("==")[0]) == key for key, (pin, _) in pins.items())
