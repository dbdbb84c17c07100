"""boto3 clients of the local AWS for the tests, one per (service, endpoint, region, credentials) in a test process.

``boto3.client(...)`` builds a client from botocore's service model and a fresh event-handler table each time (~10-25
ms of CPU); the e2e tests asked for one in every poll of a wait loop and in every helper call (about 4 % of the main
pytest workers' CPU in ``make test``, fifteenth pass). A client is thread-safe once built (botocore's documentation),
so one per distinct endpoint and identity serves every test of the process; building goes through boto3's default
session, which is not, so it is serialised. A stack started again gets new ports (a new endpoint, new clients); a new
user's keys get their own (a worker builds a few hundred at most: no eviction). A keep-alive connection its server
closed is reopened by botocore's pool as any client's would be.
"""

from __future__ import annotations

import threading
from typing import Any

import boto3

_LOCK = threading.Lock()
_CLIENTS: dict[tuple[str, str, str, str, str], Any] = {}


def client(service: str, endpoint_url: str, region: str, access_key: str, secret_key: str) -> Any:
    """The process's client of ``service`` at ``endpoint_url`` signing as ``access_key`` (built on first use)."""
    key = (service, endpoint_url, region, access_key, secret_key)
    with _LOCK:  # one build per key even when threads ask at once; boto3's default session is not thread-safe
        found = _CLIENTS.get(key)
        if found is None:
            found = _CLIENTS[key] = boto3.client(
                service,
                endpoint_url=endpoint_url,
                region_name=region,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
            )
        return found


def forget() -> None:
    """Drop every client (a test that needs its clients built again)."""
    with _LOCK:
        _CLIENTS.clear()
