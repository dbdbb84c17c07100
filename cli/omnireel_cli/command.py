"""The ``omnireel`` console script: ``omnireel_cli.main.main`` in a process that does without awscrt.

.venv holds awscrt only for the TTS relay's HTTP/2 transport. When it is importable, botocore imports it on first use
(about 0.2 s of CPU on every CLI command) and the CLI uses nothing from it: its SigV4 signing, S3 and Step Functions
calls are botocore's own Python code, as for a user whose boto3 has no CRT. So the console script makes it
unimportable before anything imports botocore. (``python -m omnireel_cli.main`` keeps the plain behaviour.)
"""

from __future__ import annotations

import sys


def main() -> int:
    sys.modules.setdefault("awscrt", None)  # type: ignore[arg-type]  # `import awscrt` -> ImportError
    from .main import main as run

    return run()
