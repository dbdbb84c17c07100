"""The CLI's calls of the HTTP API go through the Python client (``omnireel_client``); this turns its errors into the
CLI's: 4xx -> usage error (exit 2), 5xx and an unreachable API -> infrastructure error (exit 3)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from .errors import CliError, InfraError, UsageError
from .target import Target


@contextmanager
def calling(target: Target, what: str) -> Iterator[None]:
    """``what``: the sentence the error starts with (``"the job was not accepted"``)."""
    from omnireel_client import ApiError, CredentialsError, OmnireelClientError, TransportError

    try:
        yield
    except ApiError as exc:
        listed = "".join(f"\n  - {p.field}: {p.message}" for p in exc.problems) if len(exc.problems) > 1 else ""
        message = f"{what}: {exc.code} (HTTP {exc.status}): {exc.message}" + listed
        raise (UsageError(message) if 400 <= exc.status < 500 and exc.status != 429 else InfraError(message)) from None
    except TransportError as exc:
        raise InfraError(f"the {target.name} API at {target.api_url} is unreachable: {exc}") from None
    except CredentialsError as exc:
        raise InfraError(str(exc)) from None
    except OmnireelClientError as exc:
        raise CliError(f"{what}: {exc}") from None
