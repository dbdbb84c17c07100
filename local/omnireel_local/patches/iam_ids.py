"""IAM unique ids as AWS issues them: a user's ``AIDA...`` id, new at each creation, and a role session that keeps the
id of the role it was assumed from. The API's callers are keyed on these ids (``omnireel.core.caller``), reported by
the front door's IAM authorizer (``iam.authorizer``) as API Gateway reports them."""

from __future__ import annotations

from typing import Any

from ..iam.identities import unique_id
from .cards import MOTO_BUG, Context, Patch


def install_unique_ids(ctx: Context) -> None:
    from moto.iam.models import IAMBackend
    from moto.sts.models import AssumedRole

    create_user = IAMBackend.create_user

    def create_user_with_an_aws_id(self: Any, *args: Any, **kwargs: Any) -> Any:
        user = create_user(self, *args, **kwargs)
        user.id = unique_id(self.account_id, "user", user.name)  # moto: 20 random lower-case letters and digits
        return user

    IAMBackend.create_user = create_user_with_an_aws_id

    # A session's id is its role's id *when it was assumed* (AWS puts it in the session): moto looked the role up at
    # every read, so a session outlived its role's deletion and took the id of a role re-created with the same name
    # (or, with no role at all, a new random id at each read).
    assumed_init = AssumedRole.__init__
    moto_user_id = AssumedRole.user_id

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        from moto.iam.models import iam_backends

        assumed_init(self, *args, **kwargs)
        try:
            self.role_id = iam_backends[self.account_id][self.partition].get_role_by_arn(arn=self.role_arn).id
        except Exception:  # noqa: BLE001 - no such role: moto's own answer below
            self.role_id = None

    def user_id(self: Any) -> str:
        role_id = getattr(self, "role_id", None)
        return f"{role_id}:{self.session_name}" if role_id else moto_user_id.fget(self)

    AssumedRole.__init__ = init
    AssumedRole.user_id = property(user_id)


CARDS = [
    Patch(
        "9b",
        "IAM unique ids: AIDA... for users, new at each creation; a session keeps its role's id",
        aws="A user's unique id is AIDA + 17 characters, a role's AROA + 17; each creation gets a new one, so a user "
        "or role deleted and re-created with the same name is another principal. A role session's id is the role's "
        "id when it was assumed, then ':' and the session name.",
        moto="A user's id is 20 random lower-case letters and digits; a session's id is looked up from the role's "
        "current ARN at each read (a re-created role's id, or a new random id once the role is gone).",
        test="tests/e2e/test_caller_scope.py::test_a_user_deleted_and_re_created_with_the_same_name_is_a_new_caller",
        upstream=MOTO_BUG,
        installs=install_unique_ids,
    ),
]
