"""The progress displays (issue 28 item 4): what they draw, on a terminal and in plain mode (no stack needed).

Through the real commands on a pseudo-terminal and through a pipe: tests/e2e/test_progress_terminal.py."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from omnireel_cli.progress import BatchDisplay, JobDisplay, bar, batch_line, job_line, stage_durations
from omnireel_client import BatchCounts

T0 = datetime(2026, 12, 3, tzinfo=UTC)


def _times(**offsets: float) -> dict[str, datetime]:
    return {stage: T0 + timedelta(seconds=s) for stage, s in offsets.items()}


def test_finished_stages_take_their_time_to_the_next_stage() -> None:
    times = _times(accepted=0, generating_image=0.2, staging_video=1.5, rendering_video=1.7)
    assert stage_durations(times) == {"accepted": 0.2, "generating_image": 1.3, "staging_video": 0.2}


def test_a_job_line_shows_each_stage_and_the_current_one_ticking() -> None:
    times = _times(accepted=0, generating_image=0.2, staging_video=1.5)
    line = job_line("0123456789abcdef", "staging_video", times, 0.4)
    assert line == "job 01234567  accepted 0.2s > generating image 1.3s > staging video 0.4s..."
    done = job_line("0123456789abcdef", "succeeded", _times(accepted=0, generating_image=1, succeeded=3), 0)
    assert done.endswith("generating image 2.0s > succeeded")


def test_a_batch_line_has_a_bar_and_a_rate() -> None:
    counts = BatchCounts(total=4, succeeded=2, failed=1)
    assert bar(3, 4, width=8) == "[######--]" and bar(0, 0, width=4) == "[----]"
    line = batch_line("fedcba9876543210", counts, 2.0, with_bar=True)
    assert line == "batch fedcba98 [##################------] 3/4 done: 2 succeeded, 1 failed, 0 cancelled; 1.5 jobs/s"
    assert "[" not in batch_line("fedcba9876543210", counts, 2.0, with_bar=False)


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_plain_mode_writes_one_line_per_change_and_no_control_characters() -> None:
    stream = _Stream(tty=False)
    display = JobDisplay("0123456789abcdef", stream=stream)
    for status in ("accepted", "generating_image", "generating_image", "succeeded"):
        display.update(SimpleNamespace(status=status, stage_times={}))
    display.close()
    lines = stream.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == [
        "job 01234567: accepted", "job 01234567: generating image", "job 01234567: generating image",
        "job 01234567: succeeded",
    ]  # fmt: skip
    assert "\r" not in stream.getvalue() and "\x1b" not in stream.getvalue()


def test_terminal_mode_redraws_one_line_and_clears_it_at_the_end() -> None:
    stream = _Stream(tty=True)
    display = BatchDisplay("fedcba9876543210", stream=stream)
    display.update(SimpleNamespace(counts=BatchCounts(total=2, succeeded=1)))
    display.close()
    out = stream.getvalue()
    assert out.startswith("\rbatch fedcba98 [") and "1/2 done" in out and "\x1b[K" in out
    assert out.endswith("\r\x1b[K") and "\n" not in out


def test_quiet_writes_nothing() -> None:
    stream = _Stream(tty=True)
    display = JobDisplay("0123456789abcdef", enabled=False, stream=stream)
    display.update(SimpleNamespace(status="accepted", stage_times={}))
    display.close()
    assert stream.getvalue() == ""


def test_plain_mode_lists_a_stage_that_fell_between_two_polls() -> None:
    stream = _Stream(tty=False)
    display = JobDisplay("0123456789abcdef", stream=stream)
    display.update(SimpleNamespace(status="accepted", stage_times=_times(accepted=0)))
    display.update(SimpleNamespace(status="rendering_video", stage_times=_times(
        accepted=0, generating_image=0.2, staging_video=1.5, rendering_video=1.7)))  # fmt: skip
    display.close()
    assert [line.split(": ", 1)[1] for line in stream.getvalue().splitlines()] == [
        "accepted", "generating image", "staging video", "rendering video",
    ]  # fmt: skip
