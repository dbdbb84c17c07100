"""Handlers run on moto's threads here and share Powertools' metric set: the harness makes that safe (CI flake,
2026-12-01: "dictionary changed size during iteration" in the happy-path test)."""

import sys
import threading

from omnireel.runtime.observability import metrics


def hammer(threads: int = 4, calls: int = 3000) -> list[BaseException]:
    """Handlers' add_metric from several threads at once; every 100th value of a metric makes Powertools serialise
    (iterate) the shared set. A tiny switch interval makes the threads interleave inside that iteration."""
    errors: list[BaseException] = []

    def work(thread: int) -> None:
        try:
            for i in range(calls):
                metrics.add_metric(name=f"stage{thread}_{i % 40}_duration", unit="Milliseconds", value=1)
        except RuntimeError as exc:
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
    finally:
        sys.setswitchinterval(interval)
    return errors


def test_handlers_on_several_threads_can_add_metrics_at_once(make_pipeline, capsys):
    make_pipeline()
    errors = hammer()
    capsys.readouterr()  # Powertools prints the set it serialised at each 100th value
    assert not errors, f"add_metric raced on the shared metric set: {errors[:1]}"


def test_a_deployment_starts_with_no_metric_values_from_earlier_tests(request):
    for _ in range(99):  # what earlier tests left behind: one value short of Powertools' flush
        metrics.add_metric(name="api_duration", unit="Milliseconds", value=1)
    request.getfixturevalue("make_pipeline")()
    assert metrics.provider.metric_set == {}
