"""The webhook check at submit time, with a deadline on its DNS lookup (issue 33 item 2).

``POST /jobs`` and ``POST /batches`` (its ``batch.completed`` webhook), and the fan-out for every batch line with a
webhook, check where the webhook may be sent (``omnireel.webhooks.target.resolve_target``: the SSRF rules) before
anything is accepted. That check resolves the host, and ``getaddrinfo`` has no timeout of its own: a host whose
lookup takes 30 s held the API function until its 15 s Timeout (a 500) and killed BatchSubmit on every receive.

Here every lookup is bounded (``target.resolve_within``) to ``SUBMIT_RESOLVE_TIMEOUT_S``, or less when the caller has
less time left; past it the submission is refused with ``WebhookResolveTimedOut`` (a 400 at the API, a failed line in
a batch) whose message names the bound. A ``Lookups`` memo answers the same host again without a second lookup: the
lines of one batch chunk that share a slow host wait for it once, not once each.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from omnireel.webhooks.target import (
    Resolver,
    WebhookTarget,
    WebhookUnresolved,
    resolve_target,
    resolve_within,
    system_resolver,
)

# Longer than a healthy resolver takes (glibc's own per-server timeout is 5 s, and a normal answer comes in
# milliseconds), short enough that POST /jobs answers well inside the API function's 15 s Timeout.
SUBMIT_RESOLVE_TIMEOUT_S = 5.0


class WebhookResolveTimedOut(WebhookUnresolved):
    """The webhook's host gave no answer within the submit-time bound (400: the request may be sent again later)."""

    code = "WebhookResolveTimeout"


@dataclass
class Lookups:
    """Answers of a bounded resolver, kept by (host, port) for one unit of work (a batch chunk): a host that did not
    answer in time is not asked again within it."""

    resolve: Resolver = system_resolver
    answers: dict[tuple[str, int], list[str] | BaseException] = field(default_factory=dict)
    waited_s: float = 0.0  # time spent in lookups (the fan-out's time budget counts a line's writes without it)

    def bounded(self, timeout_s: float) -> Resolver:
        def lookup(host: str, port: int) -> list[str]:
            found = self.answers.get((host, port))
            if found is None:
                started = time.monotonic()
                try:
                    found = resolve_within(self.resolve, timeout_s)(host, port)
                except TimeoutError:
                    found = WebhookResolveTimedOut(
                        f"webhook: the host {host[:64]} did not resolve within {timeout_s:g} s "
                        "(a slow or unreachable DNS server); send it again later, or use a host that resolves"
                    )
                except Exception as exc:  # noqa: BLE001 - kept and raised again: resolve_target judges it
                    found = exc
                self.waited_s += time.monotonic() - started
                self.answers[(host, port)] = found
            if isinstance(found, BaseException):
                raise found
            return found

        return lookup


def check_webhook_target(
    url: str,
    *,
    allow_loopback_http: bool,
    timeout_s: float = SUBMIT_RESOLVE_TIMEOUT_S,
    lookups: Lookups | None = None,
) -> WebhookTarget:
    """``resolve_target`` with its lookup bounded to ``timeout_s`` (``WebhookResolveTimedOut`` past it)."""
    lookups = lookups if lookups is not None else Lookups()
    return resolve_target(url, allow_loopback_http=allow_loopback_http, resolve=lookups.bounded(timeout_s))
