"""SigV4 for the HTTP API (service ``execute-api``): what API Gateway's IAM authorizer, and the local front door, check.

One function for every client of the API in this repository (the CLI, the benches, the tests), so a request is signed
exactly as an app's SDK would sign it.
"""

from __future__ import annotations

from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest


def signed_headers(method: str, url: str, body: bytes | None, headers: dict[str, str], credentials: Any,
                   region: str) -> dict[str, str]:  # fmt: skip
    """``headers`` plus ``Authorization``, ``X-Amz-Date`` (and ``X-Amz-Security-Token`` for session credentials).

    ``credentials``: botocore credentials (``session.get_credentials()``) or their frozen form.
    """
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    SigV4Auth(frozen, "execute-api", region).add_auth(request)
    return dict(request.headers.items())
