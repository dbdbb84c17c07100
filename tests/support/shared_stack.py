"""The local stack a test process shares between its e2e and integration tests (the ``stack`` fixture of
tests/conftest.py), alive only while this process runs tests that use it.

An idle stack is not free: its schedules (the admission healer every local "minute"; the batch reconciler and the job
deadline's safety net every five) keep its Lambda workers and its AWS services busy: a sixth of a core measured on an
idle stack at one second a local minute, half that at two (local/omnireel_local/schedules.py). A stack kept until the
end of the run burned that beside the unit tests that come after the e2e files. So the stack starts when the first
test that uses it starts, and stops after the last test of a file when the next file this process runs does not use
it (``pytest_runtest_teardown`` knows the next item: an xdist worker waits for it before it tears down the current
one; within a file, module-scoped fixtures built on it keep it). The run order hands out the files that use the stack
first (tests/support/run_order.py), so each process starts it once; if a later file needs it after all, it starts
again, so what a test sees never depends on the order.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the collection hook imports this module in every test process: the stack's imports wait
    from tests.support.stack import LocalStack


class SharedStack:
    def __init__(self, make_home: Callable[[], Path]):
        self._make_home = make_home
        self._stack: LocalStack | None = None

    @property
    def running(self) -> bool:
        return self._stack is not None

    def get(self) -> LocalStack:
        """The running stack, started if there is none."""
        if self._stack is None:
            from tests.support.stack import start_stack

            self._stack = start_stack(self._make_home())
        return self._stack

    def stop(self) -> list[int]:
        """`omnireel local down`; the pids still alive afterwards (killed: nothing leaks)."""
        from tests.support.stack import stop_stack

        stack, self._stack = self._stack, None
        return stop_stack(stack) if stack is not None else []


def uses_shared_stack(item: object, conftest_baseid: str = "tests") -> bool:
    """Whether a collected test uses the shared ``stack`` fixture (directly or through another fixture, e.g. the
    integration tests' ``door``, or through a module's ``stack`` that reconfigures it), not a module's own fixture of
    that name that starts another stack (a variant)."""
    info = getattr(item, "_fixtureinfo", None)
    definitions = list(info.name2fixturedefs.get("stack", ())) if info is not None else []
    while definitions:  # the closest definition first; a module's `stack` that requests `stack` builds on the next
        closest = definitions.pop()
        if closest.baseid == conftest_baseid:
            return True
        if "stack" not in closest.argnames:
            return False
    return False


def stop_after(file: str, next_file: str | None, files_with_stack: set[str]) -> bool:
    """Whether the shared stack stops after a test of ``file`` when the next test this process runs is in
    ``next_file`` (None: there is none): only between files (a file's module-scoped fixtures keep the stack they got),
    and only when the next file does not use it."""
    return next_file != file and next_file not in files_with_stack
