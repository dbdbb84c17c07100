"""What every patch of moto carries (its card), what the patches share (``Context``), and two helpers."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..iam.identities import ServiceCredentials
    from ..lambda_runner import InvokeResult
    from ..sagemaker_hosting import SageMakerHosting

MOTO_VERSION = "5.2.5"

# Upstream status of a patch (``Patch.upstream``):
MOTO_BUG = "moto bug"  # moto 5.2.5 answers differently from AWS: a report is ready in local/UPSTREAM.md
LOCAL_DESIGN = "local design"  # the local stack's own choice (no Docker, the emulators, IAM on): nothing to report
SPEED = "speed"  # same answers, less CPU: could be offered upstream as a performance change, not a bug
FAULT_HOOK = "fault hook"  # off by default: tests and benchmarks inject platform faults through it


class MotoVersionMismatch(RuntimeError):
    pass


@dataclass(frozen=True)
class Patch:
    """One change to moto, with its card: what AWS does, what moto does instead, the test that fails without it, and
    whether it can go upstream. ``installs``: the function that applies it (None: applied by the patch named in
    ``installed_with``, whose code it shares)."""

    number: str
    title: str
    aws: str
    moto: str
    test: str  # pytest node id: tests/<path>.py::<test function>
    upstream: str  # MOTO_BUG | LOCAL_DESIGN | SPEED | FAULT_HOOK
    installs: Callable[[Context], None] | None
    installed_with: str | None = None


@dataclass
class Context:
    """What the patches act with: the Lambda runner (through ``run``), the asynchronous invoker, the SageMaker hosting
    shim and the credentials of the services' roles."""

    run: Callable[[Any, str], InvokeResult]
    invoker: Any  # lambda_.AsyncInvoker (not imported here: lambda_ imports this module)
    hosting: SageMakerHosting
    service_credentials: ServiceCredentials


def iso_now() -> str:
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def rebind_everywhere(name: str, original: Any, replacement: Any) -> None:
    """Every imported module whose global ``name`` is ``original`` (``from x import name`` copies) gets ``replacement``.
    Reads each module's own namespace, not getattr: a lazy module's ``__getattr__`` would load it (patch 21)."""
    for module in list(sys.modules.values()):
        if getattr(module, "__dict__", {}).get(name) is original:
            setattr(module, name, replacement)
