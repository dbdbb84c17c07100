"""CLI errors and exit codes: 0 ok, 1 job failed, 2 usage, 3 stack not running / infrastructure error."""

from __future__ import annotations

EXIT_OK = 0
EXIT_JOB_FAILED = 1
EXIT_USAGE = 2
EXIT_INFRA = 3


class CliError(Exception):
    """One clear line for the user, and the exit code that goes with it."""

    def __init__(self, message: str, code: int = EXIT_INFRA):
        super().__init__(message)
        self.code = code


class InfraError(CliError):
    def __init__(self, message: str):
        super().__init__(message, EXIT_INFRA)


class UsageError(CliError):
    def __init__(self, message: str):
        super().__init__(message, EXIT_USAGE)


class JobFailed(CliError):
    def __init__(self, message: str):
        super().__init__(message, EXIT_JOB_FAILED)
