"""The test folders do not lean on each other (issue 35 item 1, issue 36 item 4). Derived from the files on disk:

- a module under ``tests/<folder>/`` (``unit``, ``integration``, ``e2e``, ``reliability``...) imports, of the test
  code, only ``tests.support`` and its own folder: no other folder's conftest, fixtures, helpers or test modules;
- ``tests/support/`` and the root files (``tests/conftest.py``) import only ``tests.support``;
- outside tests/unit/ (whose bench/ folder tests the bench scripts themselves), a test imports bench libraries, not a
  bench script (a module with ``if __name__ == "__main__":``): the fault suite is bench/fault_suite.py, which both
  tests/reliability/ and the script bench/reliability.py import;
- a module of ``bench/`` that a test imports imports nothing of ``tests``.

A helper two folders need moves to ``tests/support/``. Imports are read from the source (every ``import`` statement,
inside functions too, relative ones resolved) and from ``pytest_plugins``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUPPORT = "tests.support"


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(root: Path, path: Path) -> Iterator[str]:
    """Every module ``path`` imports (``from x import y`` gives x.y: y may be a module), relative ones resolved, and the
    plugins it names in ``pytest_plugins``."""
    name = module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            yield from (f"{base}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytest_plugins" for t in node.targets):
            yield from (c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and type(c.value) is str)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def layout_violations(root: Path) -> list[str]:
    """``file: imported module`` for every import the rules in this module's docstring refuse."""
    found = []
    for path in python_files(root / "tests"):
        parts = path.relative_to(root / "tests").parts
        folder = f"tests.{parts[0]}" if len(parts) > 1 and parts[0] != "support" else None
        allowed = [SUPPORT, *([folder] if folder else [])]
        for imported in imported_modules(root, path):
            if _within(imported, "tests") and not any(_within(imported, a) for a in allowed):
                found.append(f"{path.relative_to(root)}: {imported}")
    return found


def is_script(path: Path) -> bool:
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in ast.parse(path.read_text()).body
    )


def bench_script_imports(root: Path) -> list[str]:
    """``file: bench module`` for every bench script a test outside tests/unit/ imports."""
    scripts = {module_name(root, p) for p in python_files(root / "bench") if is_script(p)}
    found = set()
    for path in python_files(root / "tests"):
        if path.relative_to(root / "tests").parts[0] == "unit":
            continue
        for name in imported_modules(root, path):
            found |= {f"{path.relative_to(root)}: {s}" for s in scripts if _within(name, s)}
    return sorted(found)


def bench_library_violations(root: Path) -> list[str]:
    """``file: imported module`` for every import of ``tests`` in a bench module that a test imports."""
    imported_by_tests = {
        name for path in python_files(root / "tests") for name in imported_modules(root, path) if _within(name, "bench")
    }
    found = []
    for path in python_files(root / "bench"):
        if any(_within(name, module_name(root, path)) for name in imported_by_tests):
            found += [
                f"{path.relative_to(root)}: {name}" for name in imported_modules(root, path) if _within(name, "tests")
            ]
    return found


def test_a_test_folder_imports_only_tests_support_and_itself() -> None:
    assert len(python_files(ROOT / "tests")) > 200  # the rule found the suite
    violations = layout_violations(ROOT)
    assert not violations, "imports across test folders (move the shared helper to tests/support/):\n" + "\n".join(
        violations
    )


def test_the_tests_import_bench_libraries_and_those_import_no_test_code() -> None:
    assert is_script(ROOT / "bench" / "reliability.py") and not is_script(ROOT / "bench" / "fault_suite.py")
    scripts = bench_script_imports(ROOT)
    assert not scripts, "a test imports a bench script (move what it needs to a bench library):\n" + "\n".join(scripts)
    violations = bench_library_violations(ROOT)
    assert not violations, "a bench library imported by a test imports test code:\n" + "\n".join(violations)


def test_the_rules_see_each_kind_of_import_across_folders(tmp_path: Path) -> None:
    files = {
        "tests/__init__.py": "",
        "tests/conftest.py": "import tests.unit.x\npytest_plugins = ['tests.support.f', 'tests.e2e.fixtures']\n",
        "tests/support/__init__.py": "",
        "tests/support/stack.py": "from tests.e2e import helpers\n",
        "tests/e2e/__init__.py": "",
        "tests/e2e/helpers.py": "",
        "tests/e2e/test_a.py": "from .helpers import x\nfrom tests.support.stack import s\nfrom . import helpers\n",
        "tests/integration/__init__.py": "",
        "tests/integration/conftest.py": "from tests.e2e.conftest import LocalStack\n",
        "tests/integration/x/test_b.py": "def f():\n    from ...e2e.helpers import y\n    import tests.integration.z\n",
        "tests/unit/test_c.py": "import tests.conftest as conftest\nfrom tests import support\n",
        "bench/__init__.py": "",
        "bench/suite.py": "from tests.unit.test_c import z\n",
        "bench/script.py": "from tests.support.stack import s\nif __name__ == '__main__':\n    main()\n",
        "tests/reliability/test_d.py": "from bench.suite import run\nfrom bench.script import s\n",
        "tests/unit/test_e.py": "from bench import script\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert sorted(layout_violations(tmp_path)) == [
        "tests/conftest.py: tests.e2e.fixtures",
        "tests/conftest.py: tests.unit.x",
        "tests/integration/conftest.py: tests.e2e.conftest.LocalStack",
        "tests/integration/x/test_b.py: tests.e2e.helpers.y",
        "tests/support/stack.py: tests.e2e.helpers",
        "tests/unit/test_c.py: tests.conftest",
    ]
    assert bench_script_imports(tmp_path) == ["tests/reliability/test_d.py: bench.script"]  # unit/ tests the scripts
    assert sorted(bench_library_violations(tmp_path)) == [
        "bench/script.py: tests.support.stack.s",
        "bench/suite.py: tests.unit.test_c.z",
    ]
