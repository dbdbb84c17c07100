"""Which omnireel the CLI talks to: the local stack (default) or a deployed stack (``--stack NAME --region R``).

Either way the CLI gets the same things: the HTTP API base URL, boto3 clients for S3/SNS/SQS, and the stack outputs
(InboxBucketName, JobEventsTopicArn, ...). API calls go through the Python client (``omnireel_client``, ``client/``),
which signs them with SigV4 (service ``execute-api``) as the API's IAM authorizer requires -- locally too: the front
door checks signatures against the local IAM, and the CLI signs with the local developer's access key that
``omnireel local up`` created (``credentials`` in the stack's state).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omnireel_local import home as homedir

from . import invocation
from .errors import CliError, InfraError

# What a command needs from the local stack's state file (omnireel_local.home.write_state), besides the pid that
# ``local_stack`` checks first (a state without one is a stack that is not running).
LOCAL_STATE_KEYS = ("api_url", "region", "endpoint_url")


@dataclass
class Target:
    name: str
    api_url: str
    region: str
    outputs: dict[str, str]
    endpoint_url: str | None = None
    credentials: dict[str, str] = field(default_factory=dict)
    sign: bool = False
    events_queue_url: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    _session: Any = None
    _client: Any = None

    @property
    def local(self) -> bool:
        return self.endpoint_url is not None

    @classmethod
    def local_stack(cls) -> Target:
        state = homedir.read_state()
        if not state or not state.get("ready") or not homedir.pid_alive(int(state.get("pid") or 0)):
            raise InfraError(f"the local stack is not running: start it with {invocation.hint('local up')}")
        missing = [key for key in LOCAL_STATE_KEYS if not state.get(key)]
        if missing:  # written by another omnireel version, or damaged: say so instead of a KeyError
            raise InfraError(
                f"the local stack's state file {homedir.state_path()} has no {', '.join(missing)} (another omnireel "
                f"version wrote it, or it is damaged): restart the stack with {invocation.hint('local down')}, then "
                f"{invocation.hint('local up')}"
            )
        return cls(
            name="local",
            api_url=state["api_url"],
            region=state["region"],
            outputs=state.get("outputs", {}),
            endpoint_url=state["endpoint_url"],
            credentials={k.lower(): v for k, v in developer_credentials(state).items()},
            sign=True,
            events_queue_url=state.get("events_queue_url"),
            state=state,
        )

    @classmethod
    def deployed(cls, stack: str, region: str | None) -> Target:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        session = boto3.Session(region_name=region)
        if not session.region_name:
            raise CliError("no region: pass --region or set AWS_REGION", code=2)
        try:
            described = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"][0]
        except (ClientError, BotoCoreError) as exc:
            raise InfraError(f"cannot read stack {stack} in {session.region_name}: {exc}") from exc
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        if "ApiUrl" not in outputs:
            raise InfraError(f"stack {stack} has no ApiUrl output (status {described.get('StackStatus')})")
        target = cls(name=stack, api_url=outputs["ApiUrl"], region=session.region_name, outputs=outputs, sign=True)
        target._session = session
        return target

    # ---------------------------------------------------------------- AWS clients
    def session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.Session(region_name=self.region, **self.credentials)
        return self._session

    def _signing_credentials(self) -> Any:
        """The key that signs API calls: the local developer's (no boto3 session to build, botocore not imported: a
        command that only calls the API loads neither), or the deployed stack's session's (profile, SSO...)."""
        if self._session is None and self.credentials:
            from omnireel_client.signing import StaticCredentials

            c = self.credentials
            return StaticCredentials(c["aws_access_key_id"], c["aws_secret_access_key"], c.get("aws_session_token"))
        return self.session().get_credentials()

    def client(self, service: str) -> Any:
        return self.session().client(service, endpoint_url=self.endpoint_url)

    def output(self, name: str) -> str:
        if name not in self.outputs:
            raise InfraError(f"the {self.name} stack has no output {name}")
        return self.outputs[name]

    # ---------------------------------------------------------------- HTTP API
    @property
    def api_client(self) -> Any:
        """The API client (``omnireel_client.Client``): the one implementation of signing, retries, polling and paging
        that apps use too; built on first use (a command that never calls the API never loads botocore)."""
        if self._client is None or self._client.api_url != self.api_url.rstrip("/"):
            from omnireel_client import Client

            credentials = self._signing_credentials()
            if credentials is None:
                raise InfraError("no AWS credentials to sign the API request (configure a profile or AWS_* variables)")
            self._client = Client(self.api_url, self.region, credentials)
        return self._client


def developer_credentials(state: dict[str, Any]) -> dict[str, str]:
    """The local developer identity's key (``omnireel-local``), or a clear error for an older stack."""
    try:
        return homedir.developer_credentials(state)
    except KeyError as exc:
        raise InfraError(
            "the running local stack has no developer identity (started by an older omnireel): restart it with "
            "`omnireel local down && omnireel local up`"
        ) from exc
