"""Shared helpers of the bench scripts: timing statistics, machine description, and writing results.

Every bench script owns one marked section (``<!-- bench:NAME -->`` ... ``<!-- /bench:NAME -->``) of its page, the
default of its ``--out``: a page under docs/benchmarks/ (one per bench; docs/benchmarks.md keeps the table of results
and the fair-share sections), docs/capacity.md or docs/reliability.md. It replaces only that section, so the pages are
the authoritative place for measured figures while the prose around the sections stays hand-written.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import platform
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = REPO / "docs" / "benchmarks.md"


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method), without numpy."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def machine() -> str:
    """One line: CPU model, cores, Python - what the figures were measured on."""
    model = platform.processor() or platform.machine()
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=5, check=False).stdout
        found = re.search(r"^Model name:\s*(.+)$", out, re.M)
        if found:
            model = found.group(1).strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return f"{platform.machine()}, {model}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def today() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")


def write_section(name: str, text: str, path: Path = BENCHMARKS_MD) -> None:
    """Replace the marked section ``name`` of ``path`` with ``text`` (append the section if it is missing)."""
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{text.strip()}\n{end}"
    doc = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(doc):
        doc = pattern.sub(lambda _: block, doc, count=1)
    else:
        doc = doc.rstrip() + ("\n\n" if doc else "") + block + "\n"
    path.write_text(doc)


def emit(name: str, text: str, out: str | None) -> None:
    """Print the section; write it into ``out`` (the script's page) unless out is '-'."""
    print(text)
    if out and out != "-":
        target = Path(out)
        write_section(name, text, target)
        print(f"\n(wrote section '{name}' of {target})")


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
