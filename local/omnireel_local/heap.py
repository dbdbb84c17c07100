"""Garbage collection in the local stack's long-lived processes (and the test processes): once started, leave the
start's heap out of every later collection.

CPython's cyclic collector walks every tracked object of a generation it collects, and its oldest generation holds
everything a process imported and built at start: botocore's and moto's modules and parsed service models, the
provisioned backends, the Lambda template's preloaded libraries. A process that serves many requests collects that
generation again and again although nothing in it becomes garbage. ``settle()`` moves every object into the permanent
generation (``gc.freeze()``), which collections never walk, after a collection where the heap is small (the Lambda
template, the emulators); it then raises the youngest generation's threshold, so a request's short-lived objects are
collected in fewer, larger passes. The stack server and the test processes freeze without collecting first.

Nothing here changes what any process computes: objects are freed as before (reference counting frees most at once,
and cycles made after ``settle()`` are collected as before); a frozen object that becomes garbage later, and the
start's cyclic leftovers where nothing collected them, are only reclaimed at exit: a little memory. The Lambda
template (``lambda_zygote``) collects and freezes before it forks: its workers inherit the frozen heap (their
collections never walk the template's preloaded libraries, and never write to those shared pages) and keep CPython's
default thresholds, as on Lambda.

Measured (docs/benchmarks.md, issue 35's fifth pass): one in-process pipeline deploy 0.22 -> 0.17 CPU-s; a whole
`make test` under process accounting, one run each, 564 -> 510 CPU-s (the Lambda workers 131 -> 94); with the lighter
collection, repeated runs side by side 5 min 48 s -> 4 min 54 s (medians of three).
"""

from __future__ import annotations

import gc

# The youngest generation's threshold after settle(): CPython's default is 2,000 allocations of tracked objects.
YOUNG_THRESHOLD = 20_000


def settle(*, collect: bool = True, young_threshold: int | None = YOUNG_THRESHOLD) -> None:
    """Collect (unless ``collect`` is False: a big heap's full collection costs more than the garbage it would free,
    ~0.45 s with the GIL held for the stack's, ~1 s for a test process's), freeze what survives, and (unless
    ``young_threshold`` is None) raise the youngest generation's threshold."""
    if collect:
        gc.collect()
    gc.freeze()
    if young_threshold is not None:
        young, middle, old = gc.get_threshold()
        gc.set_threshold(max(young_threshold, young), middle, old)
