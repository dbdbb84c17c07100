"""The executable reproductions of local/UPSTREAM.md still reproduce on plain moto (no omnireel patch imported): each
runs in its own Python process and must print the "actual" lines its section records. When moto fixes a bug, the
reproduction stops printing them and this test names the patch that can go (issue 29 item 1)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = ROOT / "local" / "UPSTREAM.md"
REPRO = re.compile(
    r"<!-- repro: (?P<number>\S+) -->\s*```python\n(?P<code>.*?)```.*?<!-- actual: (?P<actual>.*?) -->", re.S
)
CASES = {m["number"]: (m["code"], m["actual"].split(" | ")) for m in REPRO.finditer(UPSTREAM.read_text())}


def test_the_short_reproductions_are_found() -> None:
    assert set(CASES) >= {"2", "4", "6c", "7", "8", "13", "14b", "29"}


@pytest.mark.parametrize("number", sorted(CASES))
def test_the_reproduction_still_shows_the_bug(number: str, tmp_path: Path) -> None:
    code, actual = CASES[number]
    script = tmp_path / f"repro_{number}.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "AWS_ACCESS_KEY_ID": "testing",
                               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"})  # fmt: skip
    assert "omnireel" not in done.stderr
    for line in actual:
        assert line in done.stdout, (
            f"patch {number}: moto no longer shows the bug (expected {line!r}; got {done.stdout!r} "
            f"{done.stderr[-500:]!r}) -- drop the patch after checking its card"
        )
