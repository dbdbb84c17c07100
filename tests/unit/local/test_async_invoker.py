"""The local Lambda service's asynchronous invocations (patches/lambda_.AsyncInvoker): each function has its own queue,
as on AWS, so one function's backlog never delays another function's events."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from omnireel_local.lambda_runner import InvokeResult
from omnireel_local.patches.lambda_ import ASYNC_WORKERS_PER_FUNCTION, AsyncInvoker


@dataclass
class Fn:
    function_name: str
    function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:f"
    event_invoke_config: tuple = ()


def test_a_function_with_a_backlog_does_not_delay_another_functions_events() -> None:
    release = threading.Event()
    fast_ran = threading.Event()

    def run(fn: Fn, payload: str) -> InvokeResult:
        if fn.function_name == "slow":
            release.wait(30)  # a long run (the healer with hundreds of waiting jobs)
        else:
            fast_ran.set()
        return InvokeResult(payload="{}", errored=False)

    invoker = AsyncInvoker(run, lambda arn, body: None)
    try:
        for _ in range(2 * ASYNC_WORKERS_PER_FUNCTION):  # every worker of "slow" busy, more queued behind them
            invoker.submit(Fn("slow"), "{}", "events")
        done = invoker.submit(Fn("fast"), "{}", "sns")
        assert fast_ran.wait(10), "the other function's event waited behind the slow function's backlog"
        done.result(timeout=10)
    finally:
        release.set()
        invoker.shutdown()
