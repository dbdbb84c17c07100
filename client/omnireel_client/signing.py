"""SigV4 for the HTTP API (service ``execute-api``): what API Gateway's IAM authorizer checks, with botocore's signer.

The one signing function of the repository: the client, and through it the CLI, the UI and the benchmarks.
"""

from __future__ import annotations

from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest


def signed_headers(method: str, url: str, body: bytes | None, headers: dict[str, str], credentials: Any,
                   region: str) -> dict[str, str]:  # fmt: skip
    """``headers`` plus ``Authorization``, ``X-Amz-Date`` (and ``X-Amz-Security-Token`` for session credentials).

    ``credentials``: botocore credentials (refreshable ones are frozen per call, so a rotation is picked up).
    """
    frozen = credentials.get_frozen_credentials() if hasattr(credentials, "get_frozen_credentials") else credentials
    request = AWSRequest(method=method, url=url, data=body or b"", headers=headers)
    SigV4Auth(frozen, "execute-api", region).add_auth(request)
    return dict(request.headers.items())
