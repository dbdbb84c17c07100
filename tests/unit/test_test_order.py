"""The run order and the lanes (issue 35 items 2 and 3): tests/durations.json names every test file on disk with its
measured seconds (or an estimate for a new one), tests/conftest.py hands files out longest first from it
(tests/support/run_order.py), and the Makefile's lanes name paths and tests that exist, each run by exactly one lane."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from scripts.test_durations import test_files as files_on_disk
from tests.support import run_order
from tests.support.shared_stack import stop_after

ROOT = Path(__file__).resolve().parents[2]
REFRESH = (
    "run `make test-durations` (a real `make test` + `make test-scale`: it rewrites tests/durations.json), or until "
    "then add the file with an estimate of its seconds (by hand, or `python3 scripts/test_durations.py --estimate-new`)"
)


def _makefile() -> str:
    return (ROOT / "Makefile").read_text()


make_list = run_order.make_list  # a Makefile variable's words


def recipe(target: str) -> str:
    return _makefile().split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_durations_name_every_test_file_on_disk() -> None:
    seconds = run_order.file_seconds()
    on_disk = files_on_disk()
    assert len(on_disk) > 100  # the rule found the suite
    missing = sorted(set(on_disk) - set(seconds))
    assert not missing, f"tests/durations.json has no seconds for {missing}: {REFRESH}"
    # A file that no longer exists only keeps an unused entry (`make test-durations` drops it): not a failure, so a
    # file removed in one branch and measured in another never breaks the suite.
    assert all(s > 0 for s in seconds.values()), "every file takes some time: a 0 would never be ordered"


def test_the_file_on_disk_rule_matches_what_pytest_collects() -> None:
    # pytest's discovery (no python_files setting in pyproject.toml: test_*.py and *_test.py) and the testpaths.
    text = (ROOT / "pyproject.toml").read_text()
    assert "python_files" not in text and 'testpaths = ["tests"]' in text


def test_collection_puts_the_longest_files_first_and_keeps_each_file_together(monkeypatch) -> None:
    seconds = {"tests/unit/a.py": 1.0, "tests/e2e/b.py": 90.0, "tests/e2e/c.py": 200.0}
    monkeypatch.setattr(run_order, "file_seconds", lambda: seconds)
    monkeypatch.setattr(run_order, "file_cpu_seconds", lambda: {})

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    ids = ["tests/unit/a.py::x", "tests/e2e/b.py::y", "tests/unit/a.py::z", "tests/e2e/c.py::w[1]", "tests/new.py::n"]
    items = [Item(n) for n in ids]
    run_order.order(items)
    assert [i.nodeid for i in items] == [
        "tests/e2e/c.py::w[1]",
        "tests/e2e/b.py::y",
        "tests/unit/a.py::x",
        "tests/unit/a.py::z",
        "tests/new.py::n",
    ]
    # the collection hook of tests/conftest.py is this order
    hook = "    config.stash[FILES_WITH_STACK] = with_stack = order(items)\n"
    assert hook in (ROOT / "tests" / "conftest.py").read_text()


class _Definition:
    def __init__(self, baseid: str, argnames: tuple[str, ...] = ()) -> None:
        self.baseid = baseid
        self.argnames = argnames


class _Info:
    def __init__(self, stack_baseid: str | None, builds_on_shared: bool) -> None:
        chain = [_Definition("tests")] if stack_baseid not in (None, "tests") else []
        if stack_baseid is not None:  # pytest lists a name's definitions farthest first, the closest last
            chain.append(_Definition(stack_baseid, ("stack",) if builds_on_shared else ("tmp_path_factory",)))
        self.name2fixturedefs = {"stack": tuple(chain)} if chain else {}


class _Item:
    def __init__(self, nodeid: str, stack_baseid: str | None = None, builds_on_shared: bool = False) -> None:
        self.nodeid = nodeid
        self._fixtureinfo = _Info(stack_baseid, builds_on_shared)


def test_the_files_that_use_the_shared_stack_go_first_each_group_longest_first(monkeypatch) -> None:
    seconds = {"tests/unit/long.py": 300.0, "tests/e2e/own.py": 200.0, "tests/e2e/short.py": 5, "tests/e2e/b.py": 90}
    seconds["tests/e2e/tuned.py"] = 10
    monkeypatch.setattr(run_order, "file_seconds", lambda: seconds)
    monkeypatch.setattr(run_order, "file_cpu_seconds", lambda: {})
    items = [
        _Item("tests/unit/long.py::a"),
        _Item("tests/e2e/own.py::b", stack_baseid="tests/e2e/own.py"),  # a module's own `stack`: a variant stack
        _Item("tests/e2e/short.py::c"),  # the file uses the shared stack through one test only
        _Item("tests/e2e/short.py::d", stack_baseid="tests"),
        _Item("tests/e2e/b.py::e", stack_baseid="tests"),
        # a module's `stack` that requests `stack`: the shared one, reconfigured
        _Item("tests/e2e/tuned.py::f", stack_baseid="tests/e2e/tuned.py", builds_on_shared=True),
    ]
    with_stack = run_order.order(items)
    assert with_stack == {"tests/e2e/short.py", "tests/e2e/b.py", "tests/e2e/tuned.py"}
    assert [i.nodeid for i in items] == [
        "tests/e2e/b.py::e",
        "tests/e2e/tuned.py::f",
        "tests/e2e/short.py::c",
        "tests/e2e/short.py::d",
        "tests/unit/long.py::a",
        "tests/e2e/own.py::b",
    ]


def test_the_shared_stack_s_files_alternate_waiting_and_busy_each_half_longest_first() -> None:
    # (seconds, CPU seconds): the four longest mostly wait; the shorter ones keep a core busy
    measured = {
        "tests/e2e/limits.py": (80.0, 11.0),
        "tests/e2e/tenants.py": (60.0, 18.0),
        "tests/e2e/delivery.py": (59.0, 15.0),
        "tests/e2e/admission.py": (57.0, 9.0),
        "tests/e2e/capacity.py": (40.0, 32.0),
        "tests/e2e/batches.py": (21.0, 23.0),
        "tests/e2e/corpus.py": (15.0, 16.0),
    }
    seconds = {f: s for f, (s, _) in measured.items()} | {"tests/e2e/new.py": 30.0}
    cpu = {f: c for f, (_, c) in measured.items()}  # new.py has no CPU figure yet: it counts as busy
    assert run_order.stack_file_order(sorted(seconds), seconds, cpu) == [
        "tests/e2e/limits.py",  # waiting (under half a core), longest first
        "tests/e2e/capacity.py",  # busy, longest first
        "tests/e2e/tenants.py",
        "tests/e2e/new.py",
        "tests/e2e/delivery.py",
        "tests/e2e/batches.py",
        "tests/e2e/admission.py",
        "tests/e2e/corpus.py",
    ]


def test_busy_files_are_handed_out_in_proportion_to_the_seconds_so_they_last_to_the_end() -> None:
    seconds = {"tests/e2e/w1.py": 100.0, "tests/e2e/w2.py": 99.0} | {f"tests/e2e/b{i}.py": 20.0 - i for i in range(6)}
    cpu = {f: (10.0 if "/w" in f else s) for f, s in seconds.items()}
    assert run_order.stack_file_order(sorted(seconds), seconds, cpu) == [
        "tests/e2e/w1.py",  # half of the waiting seconds: half of the busy ones come before the next waiting file
        "tests/e2e/b0.py",
        "tests/e2e/b1.py",
        "tests/e2e/b2.py",
        "tests/e2e/w2.py",
        "tests/e2e/b3.py",
        "tests/e2e/b4.py",
        "tests/e2e/b5.py",
    ]


def test_without_cpu_figures_the_shared_stack_s_files_go_longest_first() -> None:
    seconds = {"tests/e2e/a.py": 10.0, "tests/e2e/b.py": 30.0, "tests/e2e/c.py": 20.0}
    expected = ["tests/e2e/b.py", "tests/e2e/c.py", "tests/e2e/a.py"]
    assert run_order.stack_file_order(sorted(seconds), seconds, {}) == expected


def test_the_cpu_figures_name_only_test_files_on_disk_and_are_positive() -> None:
    cpu = run_order.file_cpu_seconds()
    assert cpu, f"tests/durations.json has no cpu_seconds: {REFRESH}"
    stale = sorted(set(cpu) - set(files_on_disk()))
    assert not stale, f"tests/durations.json has CPU seconds for files not on disk: {stale}: {REFRESH}"
    assert all(c > 0 for c in cpu.values())


def test_the_shared_stack_stops_between_files_when_the_next_one_does_not_use_it() -> None:
    with_stack = {"tests/e2e/a.py", "tests/e2e/b.py"}
    assert not stop_after("tests/e2e/a.py", "tests/e2e/a.py", with_stack)  # within a file: never
    assert not stop_after("tests/e2e/a.py", "tests/e2e/b.py", with_stack)  # the next file uses it
    assert stop_after("tests/e2e/b.py", "tests/unit/c.py", with_stack)
    assert stop_after("tests/e2e/b.py", None, with_stack)  # the last test of the process
    # a file that does not use it, followed by another such: stops (nothing runs; the stack is started on demand)
    assert stop_after("tests/unit/c.py", "tests/unit/d.py", with_stack)


def test_the_waiting_lane_names_paths_that_exist_and_make_test_runs_them() -> None:
    # `make test` runs WAITING_LANE in its own pytest process and ignores it in the xdist run: a renamed path would
    # be ignored by neither and run twice, or (if only the --ignore matched) silently not at all.
    lane = make_list("WAITING_LANE")
    assert lane, "WAITING_LANE is empty"
    missing = [path for path in lane if not (ROOT / path).exists()]
    assert not missing, f"Makefile WAITING_LANE names paths that do not exist: {missing}"
    text = recipe("test")
    assert "$(LANE) \\\n\t   >$(WAIT_LOG)" in text and "--ignore=,$(LANE)" in text


def test_the_unit_lane_runs_tests_unit_at_a_lower_priority_beside_the_main_run() -> None:
    # `make test` runs UNIT_LANE in its own pytest process at nice UNIT_NICE and ignores it in the xdist run; the
    # waiting lane's files under it run in the waiting lane only. A unit lane at the main run's priority would take the
    # CPU the stacks' bursts need; one the main run does not ignore would run every unit test twice.
    lane = make_list("UNIT_LANE")
    assert lane == ["tests/unit"] and (ROOT / lane[0]).is_dir()
    assert int(make_list("UNIT_NICE")[0]) > 0
    text = recipe("test")
    assert "nice -n $(UNIT_NICE) $(LANE_PYTEST)" in text
    assert make_list("LANE_PYTEST")[:3] == ["$(DEV_PY)", "-m", "pytest"]
    assert "$(UNITS) $(addprefix --ignore=,$(LANE))" in text  # the waiting lane's unit files: not here
    assert "tests $(addprefix --ignore=,$(LANE) $(UNITS))" in text  # the main run: neither lane
    assert "[ $$units -eq 0 ]" in text  # its failing fails make test
    # Its JUnit report feeds tests/durations.json like the others'.
    assert "$(JUNIT_DIR)/unit.xml" in recipe("test-durations") and "$(call JUNIT,unit)" in text


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


def test_the_scale_lane_names_tests_that_exist_and_only_make_test_scale_runs_them() -> None:
    paths, tests = make_list("SCALE_PATHS"), make_list("SCALE_TESTS")
    assert paths and tests
    missing = [path for path in paths if not (ROOT / path).exists()]
    for node in tests:
        file, _, name = node.partition("::")
        assert re.fullmatch(r"test_\w+", name), f"SCALE_TESTS: {node} is not file.py::test_function"
        if not (ROOT / file).is_file() or name not in _test_names(ROOT / file):
            missing.append(node)
    assert not missing, f"Makefile SCALE_PATHS/SCALE_TESTS name tests that do not exist (renamed?): {missing}"
    # Nothing runs in two lanes: `make test` ignores the paths and deselects the tests, `make test-scale` runs both.
    lane = make_list("WAITING_LANE")
    scale_files = paths + [t.split("::")[0] for t in tests]
    assert not [p for p in lane for s in scale_files if s.startswith(p) or p.startswith(s)]
    assert "$(NOT_SCALE)" in recipe("test") and "$(NOT_SCALE)" in recipe("test-e2e")
    assert "$(SCALE_PATHS) $(SCALE_TESTS)" in recipe("test-scale")
    not_scale = make_list("NOT_SCALE")
    assert not_scale == ["$(addprefix", "--ignore=,$(SCALE_PATHS))", "$(addprefix", "--deselect=,$(SCALE_TESTS))"]


def test_ci_runs_make_test_with_coverage_then_the_scale_lane() -> None:
    lines = [line.split("#", 1)[0].strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert "make test COVERAGE=1" in lines and "make test-scale" in lines  # CI measures and gates coverage
    assert lines.index("make test COVERAGE=1") < lines.index("make test-scale")


def test_durations_file_is_plain_json_with_its_source() -> None:
    doc = json.loads((ROOT / "tests" / "durations.json").read_text())
    assert set(doc) == {"about", "measured", "seconds", "cpu_seconds"}


def test_a_file_measured_as_mostly_waiting_is_ruled_only_from_its_measurement() -> None:
    from tests.support.run_order import WAITING_CPU_PER_S, WAITING_MIN_S, measured_waiting

    seconds = {
        "tests/integration/a/test_peer.py": 30.0,  # 1.5 CPU-s: waiting
        "tests/e2e/test_hooks.py": 20.0,  # just under the rate: waiting
        "tests/integration/test_busy.py": 20.0,  # at the rate: not
        "tests/integration/test_short.py": WAITING_MIN_S - 0.1,  # too short to matter
        "tests/integration/test_new.py": 5.0,  # an estimate, no CPU figure yet: not
        "tests/unit/test_stretched.py": 50.0,  # the unit lane's seconds are stretched by its priority: not ruled
        "tests/reliability/test_faults.py": 200.0,  # the scale lane: not ruled
    }
    cpu = {
        "tests/integration/a/test_peer.py": 1.5,
        "tests/e2e/test_hooks.py": 20.0 * WAITING_CPU_PER_S - 0.01,
        "tests/integration/test_busy.py": 20.0 * WAITING_CPU_PER_S,
        "tests/integration/test_short.py": 0.0,
        "tests/unit/test_stretched.py": 1.0,
        "tests/reliability/test_faults.py": 5.0,
    }
    assert measured_waiting(seconds, cpu) == {"tests/integration/a/test_peer.py", "tests/e2e/test_hooks.py"}


def test_a_waiting_file_is_misplaced_unless_it_uses_the_shared_stack_or_is_in_the_lane() -> None:
    from tests.support.run_order import misplaced_waiting_files

    waiting = {"tests/e2e/test_on_stack.py", "tests/integration/c/test_listed.py", "tests/integration/d/test_in_dir.py",
               "tests/integration/test_stray.py", "tests/integration/test_not_collected.py"}  # fmt: skip
    files = {"tests/e2e/test_on_stack.py", "tests/integration/c/test_listed.py", "tests/integration/d/test_in_dir.py",
             "tests/integration/test_stray.py", "tests/integration/test_busy.py"}  # fmt: skip
    lane = ["tests/integration/c/test_listed.py", "tests/integration/d", "tests/integration/test_stra"]
    misplaced = misplaced_waiting_files(files, {"tests/e2e/test_on_stack.py"}, lane, waiting)
    assert misplaced == ["tests/integration/test_stray.py"]  # a prefix that is not a folder does not hold it


def test_the_waiting_lane_holds_every_file_measured_as_waiting_outside_the_shared_stack() -> None:
    # The rule as a run applies it (tests/conftest.py's collection, with the real fixture analysis that tells the
    # shared stack's files apart): a collection of the main run's folders must not name a file the lane lacks. Only a
    # collection (no test runs, no stack starts); bounded.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests/integration",
         "tests/e2e"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-2000:]
    assert "mostly waiting" not in done.stdout + done.stderr
