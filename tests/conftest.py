"""Test-wide safety: no test can reach real AWS (fake credentials, a fixed region)."""

import json
import os
from pathlib import Path

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

# `make test` runs files in parallel (pytest-xdist --dist loadfile --no-loadscope-reorder): a worker takes the next
# file when it is done with one. The longest files go first, so the run does not end with one worker alone on a
# long file while the others are idle (longest-processing-time-first). The seconds are measured: tests/durations.json,
# written from a real run's JUnit reports by `make test-durations`. Only the order depends on them, never what runs;
# tests/unit/test_test_order.py checks that the file names every test file on disk and nothing else.
DURATIONS = Path(__file__).resolve().parent / "durations.json"


def file_seconds() -> dict[str, float]:
    """Measured seconds per test file (`tests/...py` -> seconds)."""
    return {path: float(s) for path, s in json.loads(DURATIONS.read_text())["seconds"].items()}


def pytest_collection_modifyitems(items) -> None:
    seconds = file_seconds()
    # stable: a file stays together; a file not in the list (the order test fails for it) runs last
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::", 1)[0], 0.0))
