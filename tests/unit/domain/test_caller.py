"""Who owns a job submitted through the API: the IAM user, or the role without its session (omnireel.core.caller)."""

import pytest

from omnireel.core.caller import caller_scope


@pytest.mark.parametrize(
    ("user_arn", "scope"),
    [
        ("arn:aws:iam::123456789012:user/alice", "arn:aws:iam::123456789012:user/alice"),
        ("arn:aws:iam::123456789012:user/team/alice", "arn:aws:iam::123456789012:user/team/alice"),
        ("arn:aws:sts::123456789012:assumed-role/app/i-0abc", "arn:aws:iam::123456789012:role/app"),
        ("arn:aws:sts::123456789012:assumed-role/app/replica@host.example", "arn:aws:iam::123456789012:role/app"),
        ("arn:aws-cn:sts::123456789012:assumed-role/app/s", "arn:aws-cn:iam::123456789012:role/app"),
        ("arn:aws:iam::123456789012:root", "arn:aws:iam::123456789012:root"),
        ("arn:aws:sts::123456789012:federated-user/bob", "arn:aws:sts::123456789012:federated-user/bob"),
    ],
)
def test_the_scope_is_the_user_or_the_role_without_its_session(user_arn: str, scope: str) -> None:
    assert caller_scope(user_arn) == scope


def test_two_sessions_of_one_role_share_a_scope_and_two_roles_do_not() -> None:
    one = caller_scope("arn:aws:sts::123456789012:assumed-role/app/session-1")
    two = caller_scope("arn:aws:sts::123456789012:assumed-role/app/session-2")
    other = caller_scope("arn:aws:sts::123456789012:assumed-role/other-app/session-1")
    elsewhere = caller_scope("arn:aws:sts::210987654321:assumed-role/app/session-1")
    assert one == two and len({one, other, elsewhere}) == 3


def test_without_a_user_arn_the_caller_id_or_account_is_the_scope() -> None:
    assert caller_scope(None, caller_id="AIDAEXAMPLE", account_id="123456789012") == "AIDAEXAMPLE"
    assert caller_scope("", account_id="123456789012") == "123456789012"
    assert caller_scope(None) is None
