"""moto patch 19: the server's host -> backend resolution is cached, and chooses the same backend as moto."""

from __future__ import annotations

import os
from typing import Any

import pytest
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

from omnireel_local.patches.speed import patch_server_dispatch

HOSTS = [
    "s3.us-east-1.amazonaws.com",
    "mybucket.s3.us-east-1.amazonaws.com",
    "sqs.us-east-1.amazonaws.com",
    "dynamodb.us-east-1.amazonaws.com",
    "states.us-east-1.amazonaws.com",
    "runtime.sagemaker.us-east-1.amazonaws.com",
    "moto_api",
    "dynamodb",
    None,
]


def test_cached_dispatch_chooses_moto_s_backend_and_lists_the_package_once(monkeypatch: pytest.MonkeyPatch) -> None:
    original = DomainDispatcherApplication.get_backend_for_host
    expected = {host: original(DomainDispatcherApplication(create_backend_app), host) for host in HOSTS}
    assert expected["s3.us-east-1.amazonaws.com"] == "s3" and expected["sqs.us-east-1.amazonaws.com"] == "sqs"

    patched: dict[str, Any] = {}
    patch_server_dispatch(lambda cls, name, value: patched.__setitem__(name, value))
    if not patched:  # already applied in this process (another test started a stack): exercise the installed one
        patched["get_backend_for_host"] = DomainDispatcherApplication.get_backend_for_host
    dispatch = patched["get_backend_for_host"]
    app = DomainDispatcherApplication(create_backend_app)
    assert {host: dispatch(app, host) for host in HOSTS} == expected

    listings = []
    real_listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path=".": listings.append(path) or real_listdir(path))
    assert {host: dispatch(app, host) for host in HOSTS} == expected
    assert listings == [], "a second request for the same host listed moto's package again"
