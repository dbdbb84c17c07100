"""`omnireel logs` reads each log file incrementally: whole lines only, blank lines dropped (every printed row is
SOURCE JOB LINE, which the e2e test parses)."""

from __future__ import annotations

from pathlib import Path

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
