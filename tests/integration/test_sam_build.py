"""`make build` (sam build, no container) packages what Lambda runs: arm64 wheels and bytecode in the layer."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / ".aws-sam" / "build"


@pytest.fixture(scope="module")
def build_dir() -> Path:
    if not (ROOT / ".venv-sam" / "bin" / "sam").exists():
        pytest.skip("SAM CLI venv missing: run `make sam-venv` (make test does)")
    result = subprocess.run(["make", "-s", "build"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return BUILD


def test_layer_has_the_domain_package_compiled(build_dir):
    package = build_dir / "DomainLayer" / "python" / "omnireel"
    assert (package / "jobs" / "steps.py").exists()
    assert list((package / "jobs" / "__pycache__").glob("steps.cpython-313.pyc"))


def test_layer_wheels_are_for_arm64_lambda(build_dir):
    shared = list((build_dir / "DomainLayer" / "python" / "msgspec").glob("*.so"))
    assert shared and all("aarch64" in path.name for path in shared)


def test_every_function_is_built_from_its_folder(build_dir):
    from omnireel_template import function_folder, function_folders, load_template, serverless_functions

    built = sorted(p.name for p in build_dir.iterdir() if (p / "handler.py").exists())
    # sam build names each output folder after the function's logical id; every folder under functions/ is some
    # function's CodeUri, and every function is built.
    declared = {logical: function_folder(fn) for logical, fn in serverless_functions(load_template()).items()}
    assert built == sorted(declared)
    assert sorted(declared.values()) == function_folders() and declared


def test_layer_ships_pyvips_with_libvips_for_arm64(build_dir):
    """pyvips (a pure-Python wheel the layer Makefile builds from the sdist) and libvips from pyvips-binary."""
    python = build_dir / "DomainLayer" / "python"
    assert (python / "pyvips" / "__init__.py").exists()
    assert not list((python / "pyvips").glob("*.so"))  # ABI mode: nothing compiled for the build machine
    shared = list(python.glob("_libvips*.so")) + list((python / "pyvips_binary.libs").glob("libvips*.so*"))
    assert len(shared) >= 2
    for path in shared:
        header = path.read_bytes()[:20]
        assert header[:4] == b"\x7fELF" and int.from_bytes(header[18:20], "little") == 183, path  # EM_AARCH64
