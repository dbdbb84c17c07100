"""Issue 36 item 3: the front door's IAM authorizer looks the caller's key up once. The key's secret (to verify the
signature), the id it reports and the policies the decision reads all come from that one lookup; moto's own search
for the key (``access_control.create_access_key``: every user's keys, every session) is not run again. Requests are
signed by botocore as a client signs them and authorised against moto's backends in process (mock_aws)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID as ACCOUNT
from moto.iam import access_control
from moto.sts.models import STSBackend, sts_backends

from omnireel_local.iam import decision
from omnireel_local.iam.authorizer import Refused, authorize
from omnireel_local.iam.policy import document

REGION = "us-east-1"
HOST = "127.0.0.1:3000"
ROUTE = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:local/$default/POST/jobs"
INVOKE = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "execute-api:Invoke", "Resource": "*"}]}


@pytest.fixture
def moto_searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Each search of moto's backends for a key: moto's access-key views and STS's session lookup."""
    searches: list[str] = []
    for cls in (access_control.IAMUserAccessKey, access_control.AssumedRoleAccessKey):
        original = cls.__init__

        def init(self: Any, *args: Any, _original: Any = original, _name: str = cls.__name__, **kwargs: Any) -> None:
            searches.append(_name)
            _original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "__init__", init)
    session_lookup = STSBackend.get_assumed_role_from_access_key

    def get_assumed_role_from_access_key(self: Any, access_key_id: str) -> Any:
        searches.append("session")
        return session_lookup(self, access_key_id)

    monkeypatch.setattr(STSBackend, "get_assumed_role_from_access_key", get_assumed_role_from_access_key)
    return searches


def _call(credentials: Credentials, body: bytes = b'{"prompt": "a cat"}') -> Any:
    request = AWSRequest(method="POST", url=f"http://{HOST}/jobs", data=body, headers={"Host": HOST})
    SigV4Auth(credentials, "execute-api", REGION).add_auth(request)
    return authorize(method="POST", target="/jobs", headers=list(request.headers.items()), body=body, region=REGION,
                     route_arn=ROUTE)  # fmt: skip


def _user(iam: Any, name: str, policy: dict[str, Any] | None) -> Credentials:
    user = iam.create_user(UserName=name)["User"]
    if policy is not None:
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user["UserName"])["AccessKey"]
    return Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def test_a_user_s_key_is_looked_up_once(moto_searches: list[str]) -> None:
    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        allowed = _user(iam, "app", INVOKE)
        refused = _user(iam, "other", None)
        moto_searches.clear()
        principal = _call(allowed)
        assert moto_searches == []  # the authorizer's own lookup only: no second search through moto's users
        assert principal.arn == f"arn:aws:iam::{ACCOUNT}:user/app" and principal.access_key == allowed.access_key
        assert principal.user_id == iam.get_user(UserName="app")["User"]["UserId"]
        with pytest.raises(Refused, match="not authorized to perform: execute-api:Invoke"):
            _call(refused)  # the decision still reads the caller's own policies (none here)
        assert moto_searches == []


def test_a_role_session_s_key_is_looked_up_once(moto_searches: list[str]) -> None:
    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT},
                                                         "Action": "sts:AssumeRole"}]}  # fmt: skip
        role = iam.create_role(RoleName="app-role", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
        iam.put_role_policy(RoleName="app-role", PolicyName="p", PolicyDocument=json.dumps(INVOKE))
        keys = boto3.client("sts", region_name=REGION).assume_role(RoleArn=role["Arn"], RoleSessionName="s1")
        keys = keys["Credentials"]
        session = sts_backends[ACCOUNT]["aws"].get_assumed_role_from_access_key(keys["AccessKeyId"])
        session.role_id = role["RoleId"]  # patches.iam_ids (not installed here): the role's id when it was assumed
        moto_searches.clear()
        principal = _call(Credentials(keys["AccessKeyId"], keys["SecretAccessKey"], keys["SessionToken"]))
        assert moto_searches == ["session"]  # the session, found once; no second search through moto's sessions
        assert principal.arn == f"arn:aws:sts::{ACCOUNT}:assumed-role/app-role/s1"
        assert principal.user_id == f"{role['RoleId']}:s1" and not principal.role_gone


def test_the_key_found_is_moto_s_view_of_it() -> None:
    """``decision.found_key`` builds from what the lookup found what moto's search would return: same class, ARN,
    credentials and policies."""
    with mock_aws():
        iam = boto3.client("iam", region_name=REGION)
        user = _user(iam, "app", INVOKE)
        trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ACCOUNT},
                                                         "Action": "sts:AssumeRole"}]}  # fmt: skip
        role = iam.create_role(RoleName="app-role", AssumeRolePolicyDocument=json.dumps(trust))["Role"]
        iam.put_role_policy(RoleName="app-role", PolicyName="p", PolicyDocument=json.dumps(INVOKE))
        keys = boto3.client("sts", region_name=REGION).assume_role(RoleArn=role["Arn"], RoleSessionName="s1")
        keys = keys["Credentials"]
        session = sts_backends[ACCOUNT]["aws"].get_assumed_role_from_access_key(keys["AccessKeyId"])
        pairs = [
            (decision.found_key(ACCOUNT, "aws", user.access_key, user.secret_key, user_name="app"),
             decision.access_key(ACCOUNT, user.access_key, None)),
            (decision.found_key(ACCOUNT, "aws", keys["AccessKeyId"], keys["SecretAccessKey"], session=session),
             decision.access_key(ACCOUNT, keys["AccessKeyId"], keys["SessionToken"])),
        ]  # fmt: skip
        for found, searched in pairs:
            assert type(found) is type(searched) and found.arn == searched.arn
            assert (
                found.create_credentials().get_frozen_credentials()
                == searched.create_credentials().get_frozen_credentials()
            )
            assert found.collect_policies() == searched.collect_policies()
            documents = [[document(p) for p in decision.identity_policies(k)] for k in (found, searched)]
            assert documents[0] == documents[1] != []
