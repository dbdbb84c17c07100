"""Who submitted a job: the API caller's IAM identity, reduced to the scope that owns jobs and idempotency keys.

Pure: no AWS here. API Gateway's IAM authorizer reports ``userArn`` per request. The scope is
- an IAM user: the user ARN (``arn:aws:iam::<account>:user/<path/>name``);
- an assumed role: the *role*, not the session: ``arn:aws:sts::<account>:assumed-role/<name>/<session>`` becomes
  ``arn:aws:iam::<account>:role/<name>``. Replicas of one app (one role, a session per replica or per Lambda
  environment) are one caller, so a retry from another replica finds the same job. The STS ARN carries no role path,
  so the scope has none either (a role name is unique in its account whatever its path);
- the account root: ``arn:aws:iam::<account>:root``;
- anything else (a federated user, a future principal type): its ARN unchanged.
"""

from __future__ import annotations

import re

_ASSUMED_ROLE = re.compile(r"^arn:(?P<partition>[\w-]+):sts::(?P<account>\d{12}):assumed-role/(?P<role>[^/]+)/[^/]+$")


def caller_scope(user_arn: str | None, *, caller_id: str | None = None, account_id: str | None = None) -> str | None:
    """The owner scope of an authenticated caller, or None when the request carries no identity at all."""
    if user_arn:
        match = _ASSUMED_ROLE.match(user_arn)
        if match:
            return f"arn:{match['partition']}:iam::{match['account']}:role/{match['role']}"
        return user_arn
    return caller_id or account_id or None
