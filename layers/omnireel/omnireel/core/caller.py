"""Who submitted a job: the API caller's IAM identity, reduced to the scope that owns jobs, idempotency keys, batches
and the webhook secret.

Pure: no AWS here. API Gateway's IAM authorizer reports per request the caller's unique id (``userId``) and its ARN
(``userArn``). The scope is keyed on the unique id, never on a name: IAM gives a user or a role a new unique id each
time it is created, so a user or role deleted and re-created with the same name is a new caller and inherits none of
the old one's jobs, keys or secret (an ARN would). The ARN is kept with each record only to show people who submitted
it (``owner_arn``). The scope is

- an IAM user: its unique id (``AIDA...``);
- an assumed role, ``CallerScope=role`` (the default): the role's unique id (``AROA...``), without the session:
  replicas of one app (one role, a session per replica or per Lambda environment) are one caller, so a retry from
  another replica finds the same job;
- an assumed role, ``CallerScope=session``: the role's unique id and the session name, ``AROA...:<session>`` (the
  ``userId`` as reported), so each person signing in through IAM Identity Center (whose session name is the person's
  user name) is a caller of their own. A session name is whatever the principal that assumed the role asked for:
  it names a person only if the role's trust policy pins it (docs/callers.md). A session from a Cognito
  identity pool is ``AROA...:cognito:<identity id>`` instead: the enhanced flow names every user's session
  ``CognitoIdentityCredentials`` and the basic flow lets the app choose it, while the identity id is Cognito's own
  (a session name cannot contain ``:``, so the two forms never meet);
- the account root: the account id (its ``userId``);
- anything else (a federated user from GetFederationToken, ``<account>:<name>``; a future principal type): its
  ``userId`` unchanged.
"""

from __future__ import annotations

import re
from typing import Final, Literal

ROLE: Final = "role"
SESSION: Final = "session"
CallerScope = Literal["role", "session"]  # template.yaml CallerScope -> the API function's CALLER_SCOPE

_ASSUMED_ROLE = re.compile(r"^arn:[\w-]+:sts::\d{12}:assumed-role/[^/]+/[^/]+$")


def caller_scope(
    user_id: str | None,
    *,
    user_arn: str | None = None,
    per: CallerScope = ROLE,
    cognito_identity_id: str | None = None,
) -> str | None:
    """The owner scope of an authenticated caller, or None when the request names no unique id (API Gateway's IAM
    authorizer always does: the API refuses such a request rather than guess)."""
    if not user_id:
        return None
    role_id, colon, _session = user_id.partition(":")
    if not (colon and role_id.startswith("AROA") and user_arn and _ASSUMED_ROLE.match(user_arn)):
        return user_id  # an IAM user, the root, a federated user: its id as reported
    if per == SESSION:
        return f"{role_id}:cognito:{cognito_identity_id}" if cognito_identity_id else user_id
    return role_id
