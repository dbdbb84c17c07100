"""`omnireel logs` reads each log file incrementally: whole lines only, blank lines dropped (every printed row is
SOURCE JOB LINE, which the e2e test parses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnireel_cli import logs
from omnireel_cli.logs import Source, read_new


def test_read_new_yields_whole_non_blank_lines_and_keeps_a_partial_one(tmp_path: Path) -> None:
    log = tmp_path / "stack.log"
    log.write_bytes(b"first\n\n   \nsecond\r\nunfinished")
    source = Source(name="stack", path=log)
    assert list(read_new(source)) == ["first", "second"]
    with log.open("ab") as handle:
        handle.write(b" line\n")
    assert list(read_new(source)) == ["unfinished line"]
    assert list(read_new(source)) == []


@pytest.mark.parametrize(("tail", "shown"), [(None, ["a", "b", "c"]), (2, ["b", "c"]), (5, ["a", "b", "c"]), (0, [])])
def test_tail_shows_the_last_n_old_lines_and_zero_shows_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tail: int | None, shown: list[str]
) -> None:
    log = tmp_path / "stack.log"
    log.write_text("a\nb\nc\n")
    monkeypatch.setattr(logs, "sources", lambda target, wanted: [Source(name="stack", path=log)])
    printed: list[str] = []
    assert logs.show(None, "stack", None, follow=False, timeout=None, tail=tail, write=printed.append) == len(shown)  # type: ignore[arg-type]
    assert [line.split()[-1] for line in printed] == shown
