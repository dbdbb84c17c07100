"""``omnireel aws ARGS...``: the AWS CLI against the local stack, as the developer identity, without ``eval``.

Like LocalStack's ``awslocal``: runs ``aws ARGS...`` with the local endpoint (AWS_ENDPOINT_URL), the region and the
key of the local developer IAM user ``omnireel-local``; AWS_PROFILE / AWS_SESSION_TOKEN are removed from its
environment, so real AWS credentials cannot mix in. The AWS CLI is not part of .venv (awscli pins its own botocore):
``make aws-cli`` installs the pinned one into .venv-aws, which is used first; else ``aws`` on PATH (v1 or v2);
``OMNIREEL_AWS_CLI`` names another executable.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from omnireel_local.cfn_template import ROOT

from .errors import UsageError
from .target import Target, developer_credentials

VENV_AWS = ROOT / ".venv-aws" / "bin" / "aws"
REMOVED = ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONFIG_FILE",
           "AWS_SHARED_CREDENTIALS_FILE")  # fmt: skip


def find_aws() -> str:
    explicit = os.environ.get("OMNIREEL_AWS_CLI")
    if explicit:
        if not (Path(explicit).is_file() and os.access(explicit, os.X_OK)):
            raise UsageError(f"OMNIREEL_AWS_CLI={explicit} is not an executable file")
        return explicit
    if VENV_AWS.exists():
        return str(VENV_AWS)
    found = shutil.which("aws")
    if found:
        return found
    raise UsageError(
        "the AWS CLI is not installed: run `make aws-cli` (the pinned awscli in its own venv, .venv-aws), or install "
        'AWS CLI v2, or set OMNIREEL_AWS_CLI to its path. Without it, `eval "$(omnireel local env)"` configures '
        "boto3 and other SDKs the same way"
    )


def environment(state: dict[str, object]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in REMOVED and not k.startswith("AWS_ENDPOINT_URL")}
    env.update(developer_credentials(state))  # type: ignore[arg-type]
    env.update(
        AWS_ENDPOINT_URL=str(state["endpoint_url"]),
        AWS_REGION=str(state["region"]),
        AWS_DEFAULT_REGION=str(state["region"]),
        AWS_CONFIG_FILE=os.devnull,  # no profile settings (role_arn, sso, endpoints) from ~/.aws
        AWS_SHARED_CREDENTIALS_FILE=os.devnull,
        AWS_PAGER="",
    )
    return env


def run(arguments: list[str]) -> int:
    executable = find_aws()
    state = Target.local_stack().state
    try:
        return subprocess.call([executable, *arguments], env=environment(state))
    except KeyboardInterrupt:
        return 130
