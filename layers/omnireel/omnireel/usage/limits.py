"""Per-caller limits as HTTP states them (pure: no AWS here).

``CallerMaxPendingJobs``: jobs accepted and not yet terminal, per caller. The count is kept by the usage table's
counter item of the caller (``omnireel.aws.usage_store``), changed in the same DynamoDB transaction as the job record
(+1 when it is written, -1 at its terminal transition: exactly once each).

Who counts as the caller: an API job's owner (the caller's scope, ``omnireel.core.caller``), a batch line's batch owner,
and for files dropped into the inbox bucket without an owner the inbox itself, ``INBOX_CALLER`` (one tenant: whoever may
write prompts/ shares it; S3 events name the uploader's principal, but in a form that does not match the API's caller
scope, so the drops are not charged to an API caller).

Every POST /jobs answer carries the IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers-10, the httpapi WG's
latest: Structured Field Lists of a quoted policy name with parameters): ``RateLimit-Policy: "pending";q=<limit>;
qu="concurrent-requests"`` (a quota of concurrent units, no time window: no ``w``) and ``RateLimit: "pending";r=<left>``
(no ``t``: a pending job ends when its work does, so there is no reset time to promise; a 429 says ``Retry-After``).
No ``pk``: the draft advises against partition keys that reveal who the caller is.
"""

from __future__ import annotations

from typing import Final

POLICY: Final = "pending"
INBOX_CALLER: Final = "inbox"
# POST /jobs over the limit: how long a client should wait before it tries again. A pending job lasts about one image
# plus one video render when nothing waits (docs/capacity.md: ~15 s at the defaults); 30 s lets a few of them end.
RETRY_AFTER_S: Final = 30


def counted_as(owner: str | None) -> str:
    """The caller a job counts against: its owner, or the inbox for an ownerless drop."""
    return owner or INBOX_CALLER


def ratelimit_fields(limit: int, pending: int | None) -> dict[str, str]:
    """The RateLimit-Policy and (when the caller's count is known) RateLimit fields of a POST /jobs answer."""
    fields = {"RateLimit-Policy": f'"{POLICY}";q={limit};qu="concurrent-requests"'}
    if pending is not None:
        fields["RateLimit"] = f'"{POLICY}";r={max(0, limit - pending)}'
    return fields
