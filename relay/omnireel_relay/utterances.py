"""Which utterance an upstream event belongs to: time to first audio and "is an utterance in flight?".

vLLM-Omni numbers utterances itself: every ``input.done`` after a valid ``session.config`` is one flush, answered by
exactly one ``session.done`` carrying its ``utterance_index`` (0, 1, 2, ... per connection), and an empty flush is
answered too (``total_sentences: 0``, no ``audio.start``). ``audio.start`` carries the same ``utterance_index``.

So the relay numbers the ``input.done`` events it forwards the same way and pairs them by index, never by arrival
order: an empty flush (no ``audio.start``) or an utterance that failed cannot shift the pairing, which is what made
the relay log a 5 s time to first audio for an utterance the client heard after 125 ms (issue 10, item 4).

Bounded: at most ``MAX_PENDING`` flush timestamps are kept (a client flooding ``input.done`` faster than the
upstream answers gets no TTFA for the excess, nothing more); timestamps of answered flushes are dropped.
"""

from __future__ import annotations

import time
from typing import Any

MAX_PENDING = 256


class UtteranceTracker:
    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self.max_pending = max_pending
        self.flushes = 0  # input.done forwarded upstream
        self.answered = 0  # flushes the upstream closed with session.done (highest utterance_index + 1)
        self._done_at: dict[int, float] = {}  # flush index -> monotonic time of its input.done (insertion-ordered)
        self.unmeasured = 0  # flushes that got no timestamp because MAX_PENDING were outstanding

    @property
    def pending(self) -> int:
        """Timestamps held (bounded by ``max_pending``)."""
        return len(self._done_at)

    @property
    def in_flight(self) -> bool:
        """True while an ``input.done`` has been forwarded and its ``session.done`` has not come back."""
        return self.flushes > self.answered

    def flushed(self, now: float | None = None) -> None:
        """The relay forwarded one ``input.done``."""
        if len(self._done_at) < self.max_pending:
            self._done_at[self.flushes] = time.monotonic() if now is None else now
        else:
            self.unmeasured += 1
        self.flushes += 1

    def audio_started(self, event: dict[str, Any]) -> float | None:
        """``audio.start`` reached the client: the ``input.done`` time its first audio frame is measured from."""
        index = _index(event.get("utterance_index"))
        if index is None:  # not vLLM-Omni's shape: fall back to the oldest outstanding flush
            index = next(iter(self._done_at), None)
            if index is None:
                return None
        if _index(event.get("sentence_index")) not in (None, 0):
            return None  # a later sentence of the same flush (sentence splitting): TTFA is about the first one
        return self._done_at.pop(index, None)

    def errored(self) -> None:
        """An upstream ``error`` event: whatever was in flight counts as answered (a later ``session.done`` for it
        changes nothing; one that never comes does not hold the session)."""
        self.answered = self.flushes

    def session_done(self, event: dict[str, Any]) -> None:
        """``session.done`` ended a flush: it and every earlier one are answered."""
        index = _index(event.get("utterance_index"))
        last = self.answered if index is None else index
        self.answered = max(self.answered, last + 1)
        while self._done_at:
            first = next(iter(self._done_at))
            if first > last:
                break
            del self._done_at[first]


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
