"""The local stack's resolver hook (local_dns.py): `.test` names answered from the fault table, failures counted
across processes, only loopback answers, every other name left to the system resolver. No DNS packet is sent: the
hook answers `.test` names itself, and the answers are numeric."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from omnireel_local import local_dns


def _config(tmp_path: Path, table: dict) -> Path:
    path = tmp_path / "fault-injection.json"
    path.write_text(json.dumps({"dns": table}))
    stamp = os.stat(path).st_mtime_ns + 1_000_000  # a distinct version for every write
    os.utime(path, ns=(stamp, stamp))
    return path


def test_a_name_fails_n_times_across_processes_then_resolves_to_loopback(tmp_path: Path) -> None:
    path = _config(tmp_path, {"flaky.hooks.test": {"fail": 2, "error": "EAI_AGAIN", "functions": "WebhookDelivery"}})
    one, other = (local_dns.Table(path, "omnireel-WebhookDeliveryFunction-1") for _ in range(2))  # two workers
    with pytest.raises(socket.gaierror) as first:
        one.lookup("flaky.hooks.test")
    assert first.value.errno == socket.EAI_AGAIN
    with pytest.raises(socket.gaierror):
        other.lookup("FLAKY.hooks.test.")
    assert one.lookup("flaky.hooks.test") == "127.0.0.1"
    assert local_dns.Table(path, "omnireel-ApiFunction").lookup("flaky.hooks.test") == "127.0.0.1"
    logged = [json.loads(line) for line in (tmp_path / "fault-injection.log.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["error"]) for e in logged] == [("dns_failure", "EAI_AGAIN")] * 2

    _config(tmp_path, {"flaky.hooks.test": {"fail": 1, "error": "EAI_NONAME"}})  # a new table: counts start over
    with pytest.raises(socket.gaierror) as again:
        one.lookup("flaky.hooks.test")
    assert again.value.errno == socket.EAI_NONAME


def test_unknown_names_are_nxdomain_and_answers_are_loopback_only(tmp_path: Path) -> None:
    path = _config(tmp_path, {"out.hooks.test": {"address": "93.184.215.14"}, "always.hooks.test": {"fail": -1}})
    table = local_dns.Table(path, "fn")
    with pytest.raises(socket.gaierror) as unknown:
        table.lookup("nobody.hooks.test")
    assert unknown.value.errno == socket.EAI_NONAME
    with pytest.raises(socket.gaierror) as outside:
        table.lookup("out.hooks.test")
    assert outside.value.errno == socket.EAI_FAIL
    for _ in range(5):
        with pytest.raises(socket.gaierror):
            table.lookup("always.hooks.test")


def test_install_wraps_getaddrinfo_for_test_names_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _config(tmp_path, {"ok.hooks.test": {}})
    seen: list[object] = []
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args: seen.append(args) or [("system", args)])
    assert local_dns.install({}) is False and seen == []
    assert local_dns.install({local_dns.ENV: str(path), "AWS_LAMBDA_FUNCTION_NAME": "fn"}) is True
    socket.getaddrinfo("example.com", 443)
    socket.getaddrinfo("ok.hooks.test", 8080, 0, socket.SOCK_STREAM)
    assert seen[0][:2] == ("example.com", 443)
    assert seen[1][:2] == ("127.0.0.1", 8080) and seen[1][5] & socket.AI_NUMERICHOST  # type: ignore[index]
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo("missing.hooks.test", 80)
    assert len(seen) == 2  # the system resolver never saw a .test name
