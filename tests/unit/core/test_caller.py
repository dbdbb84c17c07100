"""Who owns a job submitted through the API (omnireel.core.caller): the caller's IAM unique id as API Gateway reports it
(``userId``), per role or per session (``CallerScope``), never its ARN (issue 33 item 10)."""

import pytest

from omnireel.core.caller import ROLE, SESSION, caller_scope
from omnireel.runtime.settings import ApiSettings

ACCOUNT = "123456789012"
USER_ID = "AIDAJQABLZS4A3QDU576Q"
ROLE_ID = "AROA3XFRBF535PLBIFPI4"
SESSION_ARN = f"arn:aws:sts::{ACCOUNT}:assumed-role/app/{{}}"


@pytest.mark.parametrize(
    ("user_id", "user_arn", "role_scope", "session_scope"),
    [
        (USER_ID, f"arn:aws:iam::{ACCOUNT}:user/alice", USER_ID, USER_ID),
        (USER_ID, f"arn:aws:iam::{ACCOUNT}:user/team/alice", USER_ID, USER_ID),
        (f"{ROLE_ID}:i-0abc", SESSION_ARN.format("i-0abc"), ROLE_ID, f"{ROLE_ID}:i-0abc"),
        (f"{ROLE_ID}:a@b.example", SESSION_ARN.format("a@b.example"), ROLE_ID, f"{ROLE_ID}:a@b.example"),
        (f"{ROLE_ID}:s", "arn:aws-cn:sts::123456789012:assumed-role/app/s", ROLE_ID, f"{ROLE_ID}:s"),
        (ACCOUNT, f"arn:aws:iam::{ACCOUNT}:root", ACCOUNT, ACCOUNT),
        # A federated user (GetFederationToken) has no unique id: its userId is "<account>:<name>", kept whole (cut at
        # the colon it would be the root's scope).
        (f"{ACCOUNT}:bob", f"arn:aws:sts::{ACCOUNT}:federated-user/bob", f"{ACCOUNT}:bob", f"{ACCOUNT}:bob"),
    ],
)
def test_the_scope_is_the_unique_id_per_role_or_per_session(
    user_id: str, user_arn: str, role_scope: str, session_scope: str
) -> None:
    assert caller_scope(user_id, user_arn=user_arn) == role_scope  # the default
    assert caller_scope(user_id, user_arn=user_arn, per=ROLE) == role_scope
    assert caller_scope(user_id, user_arn=user_arn, per=SESSION) == session_scope


def test_sessions_of_one_role_share_a_scope_per_role_and_not_per_session() -> None:
    one = (f"{ROLE_ID}:replica-1", SESSION_ARN.format("replica-1"))
    two = (f"{ROLE_ID}:replica-2", SESSION_ARN.format("replica-2"))
    assert caller_scope(one[0], user_arn=one[1]) == caller_scope(two[0], user_arn=two[1]) == ROLE_ID
    assert caller_scope(one[0], user_arn=one[1], per=SESSION) != caller_scope(two[0], user_arn=two[1], per=SESSION)


def test_a_re_created_principal_is_another_scope_whatever_its_name() -> None:
    """The same ARN with a new unique id (deleted and re-created) is a new caller; the ARN alone names nobody."""
    arn = f"arn:aws:iam::{ACCOUNT}:user/alice"
    assert caller_scope(USER_ID, user_arn=arn) != caller_scope("AIDAZZZZZZZZZZZZZZZZZ", user_arn=arn)
    session = SESSION_ARN.format("alice")
    old, new = f"{ROLE_ID}:alice", "AROAZZZZZZZZZZZZZZZZZ:alice"
    assert caller_scope(old, user_arn=session) != caller_scope(new, user_arn=session)


def test_a_cognito_session_is_scoped_by_its_identity_not_its_shared_session_name() -> None:
    """Cognito's enhanced flow names every user's session CognitoIdentityCredentials: per session, the identity id
    (Cognito's own) tells users apart; per role they are the role, like any other session."""
    user_id, arn = f"{ROLE_ID}:CognitoIdentityCredentials", SESSION_ARN.format("CognitoIdentityCredentials")
    alice = caller_scope(user_id, user_arn=arn, per=SESSION, cognito_identity_id="us-east-1:1111-aaaa")
    bob = caller_scope(user_id, user_arn=arn, per=SESSION, cognito_identity_id="us-east-1:2222-bbbb")
    assert alice == f"{ROLE_ID}:cognito:us-east-1:1111-aaaa" and alice != bob
    assert caller_scope(user_id, user_arn=arn, per=ROLE, cognito_identity_id="us-east-1:1111-aaaa") == ROLE_ID


def test_without_a_unique_id_there_is_no_scope() -> None:
    """API Gateway's IAM authorizer always reports userId; without it the API refuses (no ARN or account fallback)."""
    assert caller_scope(None, user_arn=f"arn:aws:iam::{ACCOUNT}:user/alice") is None
    assert caller_scope("", user_arn=f"arn:aws:iam::{ACCOUNT}:user/alice", per=SESSION) is None


def test_the_api_setting_reads_caller_scope_and_refuses_anything_else() -> None:
    env = {"JOBS_TABLE": "t", "ARTIFACTS_BUCKET": "b", "STATE_MACHINE_ARN": "s", "JOB_EVENTS_TOPIC_ARN": "e"}
    assert ApiSettings.from_env(env).caller_scope == ROLE
    assert ApiSettings.from_env({**env, "CALLER_SCOPE": "session"}).caller_scope == SESSION
    with pytest.raises(RuntimeError, match="CALLER_SCOPE"):
        ApiSettings.from_env({**env, "CALLER_SCOPE": "user"})
