"""scripts/extend-venv: a venv that extends .venv sees .venv's packages and its editable omnireel install, puts its
own site-packages first, and holds no copy of them (how .venv-emulator and .venv-dev are made)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXTEND = str(ROOT / "scripts" / "extend-venv")
PROBE = """
import sys, sysconfig, omnireel, omnireel_cli, boto3
own = sysconfig.get_paths()["purelib"]
sites = [p for p in sys.path if p.endswith("site-packages")]
print(sites[0] == own, omnireel.__file__, boto3.__file__, sep="\\n")
"""


def test_extended_venv_sees_the_base_and_puts_its_own_packages_first(tmp_path: Path) -> None:
    base = ROOT / ".venv"
    if not (base / "bin" / "python").exists():
        pytest.skip(".venv missing: run `make venv`")
    new = tmp_path / "venv x"  # a space in the path
    subprocess.run([EXTEND, sys.executable, str(new), str(base)], check=True, timeout=120)
    result = subprocess.run([str(new / "bin" / "python"), "-c", PROBE], capture_output=True, text=True, timeout=60,
                            check=False, cwd=tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    own_first, omnireel_file, boto3_file = result.stdout.split("\n")[:3]
    assert own_first == "True"
    assert omnireel_file == str(ROOT / "layers" / "omnireel" / "omnireel" / "__init__.py")  # the editable install
    assert boto3_file.startswith(str(base.resolve()))  # .venv's copy: nothing reinstalled
    assert not list(new.glob("lib/python*/site-packages/boto3"))
    # Re-running rewrites the .pth instead of appending to it.
    subprocess.run([EXTEND, sys.executable, str(new), str(base)], check=True, timeout=120)
    (pth,) = new.glob("lib/python*/site-packages/omnireel-extends.pth")
    assert pth.read_text().count("addsitedir") == 1


@pytest.mark.parametrize(("venv", "bases"), [(".venv-emulator", [".venv"]), (".venv-dev", [".venv-emulator", ".venv"])])
def test_the_built_venvs_hold_no_copy_of_their_bases_packages(venv: str, bases: list[str]) -> None:
    """uv installs into an extending venv only what its lock adds (--no-deps): nothing of its bases a second time."""
    if not all((ROOT / v / ".installed").exists() for v in [venv, *bases]):
        pytest.skip(f"{venv} or its bases are not built: run `make dev-venv`")

    def dists(name: str) -> set[str]:
        (site,) = (ROOT / name).glob("lib/python*/site-packages")
        return {p.name.split("-")[0].lower().replace("_", "-") for p in site.glob("*.dist-info")}

    own = dists(venv)
    assert own, f"{venv} holds no packages of its own"
    for base in bases:
        assert not own & dists(base), f"{venv} holds copies of {base}'s packages: {sorted(own & dists(base))}"
