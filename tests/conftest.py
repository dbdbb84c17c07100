"""Test-wide safety: no test can reach real AWS (fake credentials, a fixed region); the run order; the shared local
stack (``stack``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support import file_cpu
from tests.support.run_order import (
    WAITING_CPU_PER_S,
    file_cpu_seconds,
    file_of,
    file_seconds,
    measured_waiting,
    misplaced_waiting_files,
    order,
    waiting_lane,
)
from tests.support.shared_stack import SharedStack, stop_after

if TYPE_CHECKING:
    from tests.support.stack import LocalStack

# Fixtures of tests/support used by more than one folder: `chromium` (headless Chromium for the relay's page).
pytest_plugins = ["tests.support.chromium"]

os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ["AWS_SECURITY_TOKEN"] = "testing"
os.environ["AWS_SESSION_TOKEN"] = "testing"
os.environ.setdefault("POWERTOOLS_TRACE_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "omnireel-test")
# In-process handlers run on Step Functions' threads, outside pytest's capture: keep their EMF lines out of the output.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "omnireel-test")


def _share_botocore_data_loader() -> None:
    """One botocore data loader per test process, shared by every session.

    moto's mock replaces boto3's default session on every start, so each in-process test (and each handler module it
    loads) built a new botocore session with a new loader and parsed the same service models, endpoint rule sets and
    endpoints.json again: ~13 % of the pipeline tests' CPU. The loader holds only parsed, read-only copies of botocore's
    own data files (a single session shares it between its clients the same way), so what a client does is unchanged.
    Test processes only: the local stack, its Lambda workers and the CLI are separate processes and load as usual.
    """
    import botocore.loaders
    import botocore.session

    loaders: dict[object, botocore.loaders.Loader] = {}
    create_loader = botocore.loaders.create_loader

    def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        if search_path_string not in loaders:
            loaders[search_path_string] = create_loader(search_path_string)
        return loaders[search_path_string]

    botocore.session.create_loader = shared_loader


_share_botocore_data_loader()


SHARED_STACK = pytest.StashKey[SharedStack]()
FILES_WITH_STACK = pytest.StashKey[set[str]]()


FILE_CPU = pytest.StashKey["file_cpu.FileCpu | None"]()


def _file_cpu(config: pytest.Config) -> file_cpu.FileCpu | None:
    """`make test-durations` (``OMNIREEL_FILE_CPU_LOG``): this test process logs the CPU of every file it runs
    (tests/support/file_cpu.py); the xdist controller, which runs none, does not."""
    if FILE_CPU not in config.stash:
        log = os.environ.get(file_cpu.ENV)
        running_tests = not config.pluginmanager.hasplugin("dsession")
        base = config._tmp_path_factory.getbasetemp() if log and running_tests else None  # pytest's tmp_path root
        config.stash[FILE_CPU] = file_cpu.start(Path(log), base) if log and base is not None else None
    return config.stash[FILE_CPU]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    measuring = _file_cpu(item.config)
    if measuring is not None:
        measuring.boundary(file_of(item))


def pytest_sessionfinish(session: pytest.Session) -> None:
    measuring = session.config.stash.get(FILE_CPU, None)
    if measuring is not None:
        measuring.boundary(None)


# The order of the files (longest first, from the measured seconds in tests/durations.json): tests/support/run_order.py.
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[FILES_WITH_STACK] = with_stack = order(items)
    # Rules, not lists: a file that mostly waits belongs to the waiting lane (tests/support/run_order.py).
    waiting = measured_waiting(file_seconds(), file_cpu_seconds())
    misplaced = misplaced_waiting_files({file_of(item) for item in items}, with_stack, waiting_lane(), waiting)
    if misplaced:
        raise pytest.UsageError(
            f"{', '.join(misplaced)}: measured as mostly waiting (tests/durations.json: under "
            f"{WAITING_CPU_PER_S} CPU-s per second) without the shared stack: add to WAITING_LANE in the Makefile"
        )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Collection imported the test modules and the code they test: leave that heap out of every later collection of
    this process (local/omnireel_local/heap.py; not collected first: ~1 s for a few cyclic leftovers)."""
    from omnireel_local import heap

    heap.settle(collect=False)


@pytest.fixture(scope="session")
def shared_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedStack]:
    """This test process's shared local stack (tests/support/shared_stack.py): started by the first test that uses
    ``stack``, stopped after the last file that uses it (``pytest_runtest_teardown`` below) or at the end of the
    process; no process it started may be left."""
    shared = SharedStack(lambda: tmp_path_factory.mktemp("omnireel-home"))
    request.config.stash[SHARED_STACK] = shared
    try:
        yield shared
    finally:
        left = shared.stop()
        assert not left, f"processes left after `omnireel local down`: {left}"


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> LocalStack:
    """One local stack per test process (each xdist worker), started through the CLI as a user starts it, shared by
    the e2e and the integration tests (the front-door tests' ``door`` and ``door_state`` are views of it). Tests that
    need a variant start their own (tests/support/stack.py)."""
    return shared_stack.get()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the shared stack after the last test of a file when the next file does not use it (within a file, the
    module-scoped fixtures built on ``stack`` keep it): see tests/support/shared_stack.py."""
    result = yield
    shared = item.config.stash.get(SHARED_STACK, None)
    after = file_of(nextitem) if nextitem is not None else None
    if shared is not None and shared.running and stop_after(file_of(item), after, item.config.stash[FILES_WITH_STACK]):
        left = shared.stop()
        assert not left, f"processes left after `omnireel local down`: {left}"
    return result
