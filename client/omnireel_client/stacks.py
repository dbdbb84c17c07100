"""Where the API is and who signs: the running local stack, a deployed stack's outputs, or given outright."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import CredentialsError
from .signing import StaticCredentials

STATE_FILE = "state.json"


@dataclass(frozen=True)
class Endpoint:
    api_url: str
    region: str
    credentials: Any  # StaticCredentials (the local stack's key) or botocore credentials (a deployed stack's chain)
    outputs: dict[str, str]


def local_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The local stack's home: ``home``, ``$OMNIREEL_HOME``, or the first ``.omnireel/`` holding a ``state.json`` in
    the current directory or a parent (``omnireel local up`` keeps it in the checkout)."""
    if home is not None:
        return Path(home)
    if os.environ.get("OMNIREEL_HOME"):
        return Path(os.environ["OMNIREEL_HOME"])
    for folder in (Path.cwd(), *Path.cwd().parents):
        if (folder / ".omnireel" / STATE_FILE).is_file():
            return folder / ".omnireel"
    raise CredentialsError(
        "no running local stack found: start it with `omnireel local up` (or pass home= / set OMNIREEL_HOME)"
    )


def local_endpoint(home: str | os.PathLike[str] | None = None) -> Endpoint:
    """The local stack's API and its developer identity's key (what ``omnireel local up`` wrote, mode 0600)."""
    path = local_home(home) / STATE_FILE
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CredentialsError(f"cannot read the local stack's state {path}: {exc}") from None
    developer = state.get("developer") or {}
    if not state.get("ready") or not state.get("api_url") or not developer.get("access_key_id"):
        raise CredentialsError(f"the local stack at {path.parent} is not ready: `omnireel local up` starts it")
    credentials = StaticCredentials(developer["access_key_id"], developer["secret_access_key"])
    return Endpoint(str(state["api_url"]), str(state["region"]), credentials, dict(state.get("outputs") or {}))


def stack_endpoint(name: str, region: str | None = None, profile: str | None = None) -> Endpoint:
    """A deployed stack's ``ApiUrl`` output (CloudFormation DescribeStacks) and the standard credential chain."""
    import botocore.session
    from botocore.exceptions import BotoCoreError, ClientError

    session = botocore.session.Session(profile=profile)
    region = region or session.get_config_variable("region")
    if not region:
        raise CredentialsError("no region: pass region= or set AWS_REGION / a profile's region")
    credentials = session.get_credentials()
    if credentials is None:
        raise CredentialsError("no AWS credentials (a profile, AWS_* variables, SSO, an instance role...)")
    try:
        cloudformation = session.create_client("cloudformation", region_name=region)
        stack = cloudformation.describe_stacks(StackName=name)["Stacks"][0]
    except (BotoCoreError, ClientError) as exc:
        raise CredentialsError(f"cannot read stack {name} in {region}: {exc}") from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    if "ApiUrl" not in outputs:
        raise CredentialsError(f"stack {name} has no ApiUrl output (status {stack.get('StackStatus')})")
    return Endpoint(outputs["ApiUrl"], region, credentials, outputs)


def default_credentials(profile: str | None = None) -> Any:
    import botocore.session

    return botocore.session.Session(profile=profile).get_credentials()
