"""Every change the local stack makes to moto, by service, each with its card (``cards.Patch``: what AWS does, what
moto 5.2.5 does instead, the test that fails without it, and its upstream status; reports for the moto bugs are in
local/UPSTREAM.md). ``apply()`` refuses any other moto version: the patched methods are internals, and a silent
mismatch would make the local stack lie. To move to a new moto, re-verify each card (UPSTREAM.md's reproductions say
which bugs are fixed) and bump ``cards.MOTO_VERSION``.

Modules: ``lambda_`` (the runner, asynchronous invocations, SQS event sources), ``stepfunctions``, ``sagemaker``,
``s3``, ``sqs_sns``, ``dynamodb``, ``events`` (EventBridge), ``iam_auth`` (SigV4 and policies on every call), ``speed``
(same answers, less CPU).

``ORDER`` is the order ``apply()`` installs them, and why it is that order:

1. 21 first: it must run before anything imports moto's Step Functions interpreter (which imports ``moto.batch``).
2. The service patches next, in card-number order: each replaces a different method, so their order among themselves
   does not matter -- except 29 before 29b before 30, whose fault hooks wrap the size- and character-checking send
   methods 29 and 29b install, and 25 before 29 for the same reason (29, 29b and 30 call the send method that is in
   place when they are installed).
3. 9 (IAM) and 12 last: 9 wraps moto's request authentication, which every patched handler passes through, and 12
   rebinds the Step Functions client factory in every module that imported it, so the interpreter (imported by 2, 8,
   17, 18 and 22) must be imported by then.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import moto

from ..iam.identities import ServiceCredentials
from ..lambda_runner import Invocation, InvokeResult, LambdaRunner
from ..sagemaker_hosting import SageMakerHosting
from . import dynamodb, events, iam_auth, iam_ids, lambda_, s3, sagemaker, speed, sqs_sns, stepfunctions
from .cards import MOTO_VERSION, Context, MotoVersionMismatch, Patch
from .iam_auth import enforce_iam
from .lambda_ import SQS_EVENT_SOURCES, AsyncInvoker

log = logging.getLogger("omnireel_local.moto")

MODULES = (lambda_, stepfunctions, sagemaker, s3, sqs_sns, dynamodb, events, iam_auth, iam_ids, speed)
CARDS: dict[str, Patch] = {card.number: card for module in MODULES for card in module.CARDS}
ORDER: tuple[str, ...] = (
    "21",  # before anything imports moto's Step Functions interpreter
    "1", "2", "3", "4", "5", "6", "6b", "6c", "7", "8", "13", "14", "14b", "15", "15b", "16", "17", "18", "18b",
    "19", "20",
    "22", "23", "24", "25", "26", "27", "28", "29", "29b", "30",  # 25 -> 29 -> 29b -> 30: each wraps the send in place
    "31", "32", "33", "34", "35", "36", "37", "38",
    "9b",  # IAM unique ids: before the identities the stack creates once provisioned (any place before that works)
    "9", "12",  # last: 9 wraps every request's authentication, 12 rebinds the interpreter's client factory
)  # fmt: skip

_applied = False


def apply(
    runner: LambdaRunner,
    hosting: SageMakerHosting,
    sqs_send: Callable[[str, str], None],
    service_credentials: ServiceCredentials,
) -> AsyncInvoker:
    """Install every patch into this process (the one that runs the moto server), in ``ORDER``. Once per process."""
    global _applied
    if moto.__version__ != MOTO_VERSION:
        raise MotoVersionMismatch(
            f"omnireel's local stack patches moto {MOTO_VERSION} internals, but moto {moto.__version__} is installed; "
            f"install moto=={MOTO_VERSION} (requirements/) or re-verify omnireel_local/patches/"
        )
    if _applied:
        raise RuntimeError("moto patches are already applied in this process")

    def run(fn: Any, payload: str) -> InvokeResult:
        env = dict((fn.environment_vars or {}) if hasattr(fn, "environment_vars") else {})
        logging_config = getattr(fn, "logging_config", None) or {}
        return runner.invoke(
            Invocation(
                function_name=fn.function_name,
                function_arn=fn.function_arn,
                handler=fn.handler,
                runtime=fn.run_time or "python3.13",
                timeout_s=float(fn.timeout or 3),
                memory_mb=int(fn.memory_size or 128),
                environment=env,
                payload=payload,
                log_group=logging_config.get("LogGroup") if isinstance(logging_config, dict) else None,
                role_arn=str(getattr(fn, "role", "") or ""),
            )
        )

    context = Context(run=run, invoker=AsyncInvoker(run, sqs_send), hosting=hosting,
                      service_credentials=service_credentials)  # fmt: skip
    for number in ORDER:
        install = CARDS[number].installs
        assert install is not None, number
        install(context)
    _applied = True
    log.info("moto %s patched: %d patches (%s)", MOTO_VERSION, len(CARDS), ", ".join(ORDER))
    return context.invoker


__all__ = [
    "CARDS",
    "MOTO_VERSION",
    "ORDER",
    "SQS_EVENT_SOURCES",
    "AsyncInvoker",
    "MotoVersionMismatch",
    "Patch",
    "apply",
    "enforce_iam",
]
