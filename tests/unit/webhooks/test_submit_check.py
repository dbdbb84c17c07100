"""The submit-time webhook check's deadline (issue 33 item 2): omnireel.webhooks.submit_check, with stub resolvers
(no packet is sent)."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from omnireel.batches.batch import Line
from omnireel.batches.fanout import webhook_host
from omnireel.webhooks.submit_check import Lookups, WebhookResolveTimedOut, check_webhook_target
from omnireel.webhooks.target import WebhookRefused, WebhookUnresolved


class Hanging:
    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls += 1
        self.release.wait(30)
        return ["93.184.215.14"]


def test_a_lookup_past_the_bound_is_a_clear_refusal_within_the_bound() -> None:
    hanging = Hanging()
    try:
        started = time.monotonic()
        with pytest.raises(WebhookResolveTimedOut) as refused:
            check_webhook_target("https://slow.example/h", allow_loopback_http=False, timeout_s=0.2,
                                 lookups=Lookups(hanging))  # fmt: skip
        assert time.monotonic() - started < 2
    finally:
        hanging.release.set()
    assert refused.value.code == "WebhookResolveTimeout"
    assert isinstance(refused.value, WebhookUnresolved)  # a 400 at the API, as any unresolved host
    assert refused.value.message == (
        "webhook: the host slow.example did not resolve within 0.2 s (a slow or unreachable DNS server); send it "
        "again later, or use a host that resolves"
    )


def test_one_lookup_per_host_and_port_for_a_unit_of_work() -> None:
    hanging = Hanging()
    lookups = Lookups(hanging)
    try:
        for _ in range(3):
            with pytest.raises(WebhookResolveTimedOut):
                check_webhook_target("https://slow.example/a", allow_loopback_http=False, timeout_s=0.1,
                                     lookups=lookups)  # fmt: skip
        assert hanging.calls == 1
    finally:
        hanging.release.set()


def test_other_answers_are_judged_as_before() -> None:
    def nxdomain(host: str, port: int) -> list[str]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(WebhookUnresolved, match="does not resolve") as unresolved:
        check_webhook_target("https://gone.example/", allow_loopback_http=False, lookups=Lookups(nxdomain))
    assert not isinstance(unresolved.value, WebhookResolveTimedOut)
    with pytest.raises(WebhookRefused, match="private"):
        check_webhook_target(
            "https://in.example/", allow_loopback_http=False, lookups=Lookups(lambda h, p: ["10.0.0.9"])
        )
    target = check_webhook_target("https://ok.example/x", allow_loopback_http=False,
                                  lookups=Lookups(lambda h, p: ["93.184.215.14"]))  # fmt: skip
    assert target.address == "93.184.215.14"


@pytest.mark.parametrize(
    ("text", "host"),
    [
        ('{"prompt": "a"}', None),
        ('{"prompt": "a", "webhook": "https://h.example/x"}', ("h.example", 443)),
        ('{"prompt": "a", "webhook": "http://H.test:8080/x"}', ("h.test", 8080)),
        ('{"prompt": "webhook"}', None),
        ('{"prompt": "a", "webhook": 3}', None),
        ('{"webhook": "https://h.example:99999/"} trailing', ("", 0)),  # unclear: counted as a lookup
    ],
)
def test_the_time_budget_reads_a_lines_webhook_host_as_the_check_will(text: str, host: tuple[str, int] | None) -> None:
    assert webhook_host(Line(1, text)) == host
