"""The fault suite's trail of an unfinished job: the log lines that name it, from every file of the stack's log folder
(the stack's own log, the Lambda workers', the containers'), read before the stack's home is removed."""

from __future__ import annotations

from pathlib import Path

from bench import fault_suite


def test_the_trail_is_every_line_naming_the_job_in_every_log_file_and_only_the_last_ones(tmp_path: Path) -> None:
    (tmp_path / "lambda").mkdir()
    (tmp_path / "stack.log").write_text("started job-1\nnothing\nfinished job-2\n")
    (tmp_path / "lambda" / "api.log").write_text("job-1 accepted\njob-10 accepted\n")
    assert fault_suite.log_trail(tmp_path, "job-1") == [
        "api.log: job-1 accepted",
        "api.log: job-10 accepted",  # a plain substring match: an id that contains another is kept, never lost
        "stack.log: started job-1",
    ]
    many = "\n".join(f"line {i} job-3" for i in range(fault_suite.TRAIL_LINES + 5))
    (tmp_path / "stack.log").write_text(many)
    trail = fault_suite.log_trail(tmp_path, "job-3")
    assert len(trail) == fault_suite.TRAIL_LINES and trail[-1].endswith(f"line {fault_suite.TRAIL_LINES + 4} job-3")
