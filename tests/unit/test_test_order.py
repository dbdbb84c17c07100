"""The run order list in tests/conftest.py names files that exist (a renamed file would silently lose its place)."""

from pathlib import Path

from tests.conftest import SLOWEST_FIRST

ROOT = Path(__file__).resolve().parents[2]


def test_every_file_in_the_slowest_first_list_exists() -> None:
    missing = [path for path in SLOWEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"tests/conftest.py SLOWEST_FIRST names files that do not exist: {missing}"
    assert len(set(SLOWEST_FIRST)) == len(SLOWEST_FIRST)


def test_collection_puts_the_listed_files_first_and_keeps_each_file_together() -> None:
    from tests.conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid = nodeid

    items = [Item(n) for n in ("tests/unit/a.py::x", f"{SLOWEST_FIRST[1]}::y", "tests/unit/a.py::z")]
    items += [Item(f"{SLOWEST_FIRST[0]}::w")]
    pytest_collection_modifyitems(items)
    assert [i.nodeid for i in items] == [
        f"{SLOWEST_FIRST[0]}::w",
        f"{SLOWEST_FIRST[1]}::y",
        "tests/unit/a.py::x",
        "tests/unit/a.py::z",
    ]


def test_the_waiting_lane_names_paths_that_exist_and_make_test_runs_them() -> None:
    # `make test` runs WAITING_LANE in its own pytest process and ignores it in the xdist run: a renamed path would
    # be ignored by neither and run twice, or (if only the --ignore matched) silently not at all.
    makefile = (ROOT / "Makefile").read_text()
    lines = iter(makefile.split("WAITING_LANE :=", 1)[1].splitlines())
    text = next(lines)
    while text.endswith("\\"):  # continued on the next line
        text = text[:-1] + " " + next(lines)
    lane = text.split()
    assert lane, "WAITING_LANE is empty"
    missing = [path for path in lane if not (ROOT / path).exists()]
    assert not missing, f"Makefile WAITING_LANE names paths that do not exist: {missing}"
    recipe = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "$(LANE) \\\n\t   >$(WAIT_LOG)" in recipe and "--ignore=,$(LANE)" in recipe
