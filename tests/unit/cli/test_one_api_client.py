"""Issue 28 item 2: the CLI has no second implementation of the API client. Derived from the code: no module of
``omnireel_cli`` signs requests (botocore's SigV4 signer, ``execute-api``) or makes HTTP requests of its own, except
``ui.py``'s streaming of presigned artifact URLs and ``batches.py``'s PUT of a batch file to its presigned upload URL
(S3, not the API); every API call goes through ``omnireel_client``."""

from __future__ import annotations

import ast
from pathlib import Path

import omnireel_cli

CLI = Path(omnireel_cli.__file__).parent
HTTP_MODULES = {"urllib.request", "http.client", "httpx", "requests", "botocore.auth", "botocore.awsrequest"}
# module -> what it may import of HTTP_MODULES, and why
ALLOWED = {
    "ui.py": {"urllib.request"},  # streams presigned S3 URLs of artifacts to the page (Range passed through)
    "batches.py": {"urllib.request"},  # PUTs a file to the presigned S3 URL POST /batches/uploads answered (S3)
}


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_no_cli_module_talks_http_or_signs_by_itself() -> None:
    modules = sorted(CLI.glob("*.py"))
    assert len(modules) > 10  # the rule looked at the package
    for path in modules:
        used = _imports(path) & HTTP_MODULES
        assert used <= ALLOWED.get(path.name, set()), f"{path.name} imports {used}: use omnireel_client"
        assert "SigV4Auth" not in path.read_text(), path.name


def test_the_cli_uses_the_client() -> None:
    users = [p.name for p in CLI.glob("*.py") if any(m.startswith("omnireel_client") for m in _imports(p))]
    assert {"target.py", "api.py", "jobs.py", "batches.py"} <= set(users), users
