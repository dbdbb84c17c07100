"""IAM in the local stack, in one folder: how a call is authorised, from its signature to the decision (local/IAM.md).

- ``sigv4``: the one SigV4 verifier (botocore's canonical request, the body as received) for every door;
- ``identities``: who calls (the stack's users, the services' role sessions, IAM unique ids);
- ``policy``: the caller (``Principal``, the one class for it), the request context and the evaluator of policy
  documents (Conditions included);
- ``decision``: the decision of one call: the caller's identity policies as moto stores them and the resource's own;
- ``authorizer``: the HTTP API's front door (API Gateway's ``AWS_IAM`` authorizer, ``execute-api:Invoke``).

moto's API handlers are wired to it by the moto patch ``patches/iam_auth.py`` (patches 9-11) and ``patches/iam_ids.py``
(9b). Nothing is imported here: each door imports the modules it uses.
"""
