"""Test-wide safety: no test can reach real AWS (fake credentials, a fixed region)."""

import os

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
# long file while the others are idle (longest-processing-time-first). Order of the files' seconds in `make test` on
# 2 cores (junit times, 2026-12-01); a file not listed runs after these in collection order. Only the order depends on
# this list, never what runs: tests/unit/test_test_order.py checks that every path still exists.
SLOWEST_FIRST = (
    "tests/reliability/test_faults.py",
    "tests/integration/pipeline/test_state_machine.py",
    "tests/e2e/test_executions.py",
    "tests/e2e/test_consumers.py",
    "tests/e2e/test_lifecycle.py",
    "tests/integration/relay/test_relay_long_utterances.py",
    "tests/e2e/test_s3_corpus.py",
    "tests/integration/corpus/test_api_corpus_front_door.py",
    "tests/e2e/test_supervisor.py",
    "tests/e2e/test_batches.py",
    "tests/integration/pipeline/test_entry_points.py",
    "tests/unit/template/test_cold_path_imports.py",
    "tests/e2e/test_invoke.py",
    "tests/e2e/test_cli.py",
    "tests/integration/test_sam_build.py",
)


def pytest_collection_modifyitems(items) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: a file stays together
