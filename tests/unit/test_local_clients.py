"""tests/support/local_clients.py: one boto3 client per (service, endpoint, region, credentials) in a test process,
built once even when threads ask at the same time; another endpoint or identity gets its own. No request is sent."""

from __future__ import annotations

import threading

from tests.support import local_clients

ENDPOINT = "http://127.0.0.1:9"  # never contacted: building a client sends nothing


def test_the_same_endpoint_and_identity_get_the_same_client() -> None:
    first = local_clients.client("dynamodb", ENDPOINT, "us-east-1", "AKIDONE", "secret-one")
    assert local_clients.client("dynamodb", ENDPOINT, "us-east-1", "AKIDONE", "secret-one") is first
    assert first.meta.endpoint_url == ENDPOINT and first.meta.region_name == "us-east-1"
    assert first._request_signer._credentials.access_key == "AKIDONE"


def test_another_endpoint_region_identity_or_service_gets_its_own() -> None:
    base = ("s3", ENDPOINT, "us-east-1", "AKIDONE", "secret-one")
    first = local_clients.client(*base)
    others = [
        local_clients.client("sqs", *base[1:]),
        local_clients.client("s3", "http://127.0.0.1:10", *base[2:]),
        local_clients.client("s3", ENDPOINT, "eu-west-1", *base[3:]),
        local_clients.client("s3", ENDPOINT, "us-east-1", "AKIDTWO", "secret-two"),
        local_clients.client("s3", ENDPOINT, "us-east-1", "AKIDONE", "rotated"),
    ]
    assert all(other is not first for other in others)
    assert len({id(other) for other in others}) == len(others)
    assert others[3]._request_signer._credentials.access_key == "AKIDTWO"
    assert others[4]._request_signer._credentials.secret_key == "rotated"


def test_threads_asking_at_once_share_one_client() -> None:
    local_clients.forget()
    start, found = threading.Barrier(8), []

    def ask() -> None:
        start.wait()
        found.append(local_clients.client("sns", ENDPOINT, "us-east-1", "AKIDTHREADS", "secret"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(found) == 8 and len({id(client) for client in found}) == 1
