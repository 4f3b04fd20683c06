"""What an informer says of an outage, against a loopback port that refuses and then answers:
the first failure as a warning, a line a minute (here: a fraction of a second) while it goes
on, then that it lists again; the retries in between at debug level only."""

from __future__ import annotations

import json
import logging
import socket
import time

import pytest

from clusters.helpers.waiting import QuietHandler, http_server, loopback_client, wait_for
from kubebase.kinds import CONFIG_MAP
from kubecontrol import informer as informer_module
from kubecontrol.controller import fields
from kubecontrol.informer import Informer


class EmptyList(QuietHandler):
    def do_GET(self) -> None:
        if "watch=" in self.path:
            time.sleep(0.2)  # a watch that ends with nothing to say
            self.reply(200, b"")
            return
        listed = {"kind": "ConfigMapList", "metadata": {"resourceVersion": "1"}, "items": []}
        self.reply(200, json.dumps(listed).encode())


def test_an_outage_is_said_once_then_a_line_a_minute_then_its_end(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(informer_module, "STILL_FAILING_EVERY", 2.5)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # refused, until a server takes the port
    caplog.set_level(logging.DEBUG, logger="kubecontrol.informer")
    informer = Informer(loopback_client(port), CONFIG_MAP, name="w1-ConfigMap", list_timeout=1)
    informer.start()
    try:
        wait_for(
            lambda: any(r.message == "watch still failing" for r in caplog.records),
            20,
            what="a line saying the outage goes on",
        )
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        first, then = fields(warnings[0]), fields(warnings[1])
        assert warnings[0].message == "watch failed" and first["informer"] == "w1-ConfigMap"
        error = str(first["error"])
        assert error.startswith("listing again: ") and "TransportError" in error
        assert all(w.message == "watch still failing" for w in warnings[1:]), warnings
        assert then["informer"] == "w1-ConfigMap" and int(str(then["tries"])) >= 2
        assert int(str(then["seconds"])) >= 2 and "TransportError" in str(then["error"])
        assert any(r.levelno == logging.DEBUG for r in caplog.records)  # the retries between
        with http_server(EmptyList, port=port):
            wait_for(lambda: informer.synced.is_set(), 20, what="the informer to list again")
            wait_for(
                lambda: any(r.message == "listing and watching again" for r in caplog.records),
                5,
                what="the outage's end",
            )
        end = [fields(r) for r in caplog.records if r.message == "listing and watching again"]
        assert end[0]["informer"] == "w1-ConfigMap"
        assert int(str(end[0]["failedTries"])) >= int(str(then["tries"]))
        assert int(str(end[0]["seconds"])) >= 2
    finally:
        informer.stop()
