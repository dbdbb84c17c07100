"""Issue 33 items 8 and 9 on the local stack, through the front door and the delivery function the template wires.

- A webhook on a port other than 443/8443 is a 400 at submit naming the rule (a ``.test`` name: the local resolver
  hook answers it, nothing is looked up on the network, and the port is refused before any lookup anyway).
- What a caller reads about an attempt cannot tell a closed port from one that accepts and never answers.
- Right after a rotation, ``GET /webhooks/secret`` says which secrets sign now, and a delivery made then carries
  exactly those (the delivery function keeps the master key 5 minutes: the default, not shortened here).
- While the master key is the single secret of before (which the stack refuses to sign with), the job shows the
  attempts it could not sign, not ``deliveries: {}``.

Receivers are ``omnireel webhooks listen`` and sockets on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from omnireel_local.home import free_port
from tests.support.frontdoor import FrontDoorClient, new_user
from tests.support.stack import LocalStack, reconfigured

from .helpers import SMALL_MEDIA, aws_client, wait_for
from .test_webhook_tenants import DELIVERY_TIMEOUT_S, receivers

pytestmark = pytest.mark.e2e


def _door(stack: LocalStack) -> FrontDoorClient:
    state = stack.state()
    _, credentials = new_user(state)
    return FrontDoorClient(state["api_url"], state["region"], credentials)


def _deliveries(door: FrontDoorClient, job_id: str) -> dict[str, Any]:
    reply = door.get_job(job_id)
    assert reply.status == 200, reply.body
    return (reply.json.get("webhook") or {}).get("deliveries") or {}


def _submit(door: FrontDoorClient, prompt: str, webhook: str) -> str:
    reply = door.post_json({"prompt": prompt, **SMALL_MEDIA, "webhook": webhook})
    assert reply.status == 202, reply.body
    return str(reply.json["job_id"])


# ---------------------------------------------------------------- item 8: ports
@pytest.mark.parametrize("port", [22, 80, 6379, 9443])
def test_a_webhook_on_another_port_than_443_or_8443_is_refused_at_submit_naming_the_rule(
    stack: LocalStack, port: int
) -> None:
    door = _door(stack)
    url = f"https://ports.hooks.test:{port}/in"
    reply = door.post_json({"prompt": "a webhook on a port webhooks may not use", "webhook": url})
    assert reply.status == 400, reply.body
    error = reply.json["error"]
    assert error["code"] == "WebhookRefused"
    assert error["message"] == f"webhook: port {port} is not allowed: an https:// webhook uses port 443 or 8443"
    batch = door.request("POST", "/batches", json.dumps({"jobs": [{"prompt": "p"}], "webhook": url}).encode())
    assert batch.status == 400 and batch.json["error"]["message"] == error["message"], batch.body


# ---------------------------------------------------------------- item 8: no port scanning through the job view
@contextlib.contextmanager
def _silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers (a filtered or tarpitted service)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.5)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                held.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        listener.close()


# WEBHOOK_ATTEMPT_DEADLINE_SECONDS while the silent port is tried (the template's is 10 s): the silent port's attempt
# ends at the deadline, whatever it is; what the caller reads of it does not depend on its length.
SILENT_DEADLINE_S = 2


def test_a_closed_port_and_a_silent_one_read_the_same_in_the_job_view(stack: LocalStack) -> None:
    door = _door(stack)
    closed = free_port()
    deadline = {"WEBHOOK_ATTEMPT_DEADLINE_SECONDS": str(SILENT_DEADLINE_S)}
    with reconfigured(stack, deadline), _silent_port() as silent:
        jobs = {
            "closed": _submit(door, "a webhook at a closed port", f"http://127.0.0.1:{closed}/in"),
            "silent": _submit(door, "a webhook at a port that never answers", f"http://127.0.0.1:{silent}/in"),
        }
        states = {}
        for kind, job_id in jobs.items():
            states[kind] = wait_for(
                lambda job_id=job_id: _deliveries(door, job_id).get("job.succeeded"),
                DELIVERY_TIMEOUT_S,
                f"the {kind} port's first attempt recorded",
            )
    shown = {kind: (s["outcome"], s["last_status"], s["last_error"], s["refused"]) for kind, s in states.items()}
    assert shown["closed"] == shown["silent"], shown
    assert shown["closed"][:2] == ("unreachable", None)
    for state in states.values():  # nothing more precise anywhere in what the caller reads
        text = json.dumps(state)
        assert "Refused" not in text and "deadline" not in text and "Errno" not in text, text


# ---------------------------------------------------------------- item 9: rotation as the caller sees it
@pytest.fixture
def master_key_restored(stack: LocalStack) -> Iterator[None]:
    """The master key is put back afterwards, and the API and delivery functions get new execution environments (a
    configuration change), so no later test reads a rotated key from a warm cache."""
    lambda_ = aws_client(stack, "lambda")
    manager = aws_client(stack, "secretsmanager")
    arn = stack.outputs["OMNIREEL_WEBHOOK_SIGNING_SECRET_ARN"]
    original = manager.get_secret_value(SecretId=arn)["SecretString"]
    names = [
        f["FunctionName"]
        for f in lambda_.list_functions()["Functions"]
        if any(part in f["FunctionName"] for part in ("-ApiFunction", "-WebhookDeliveryFunction"))
    ]
    assert len(names) == 2, names
    environments = {name: lambda_.get_function_configuration(FunctionName=name)["Environment"] for name in names}
    try:
        yield
    finally:
        manager.put_secret_value(SecretId=arn, SecretString=original)
        for name, environment in environments.items():
            variables = {**environment.get("Variables", {}), "WEBHOOK_KEY_CACHE_SECONDS": "299"}
            lambda_.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
            lambda_.update_function_configuration(FunctionName=name, Environment=environment)


def _view(stack: LocalStack) -> dict[str, Any]:
    return json.loads(stack.cli("webhooks", "secret", "--json", check=True).stdout)


def _expected_signers(view: dict[str, Any]) -> list[str]:
    """The secrets the view says sign a delivery made now. Before issue 33 the answer had no ``signing``: a
    ``previous_secret`` meant both sign (its documentation: "every delivery carries two signatures")."""
    if "signing" in view:
        return [view[name] for name in view["signing"]]
    return [view["secret"], view["previous_secret"]] if view.get("previous_secret") else [view["secret"]]


def test_right_after_a_rotation_the_secret_view_says_what_deliveries_carry(
    stack: LocalStack, master_key_restored: None
) -> None:
    old = stack.cli("webhooks", "secret", check=True).stdout.strip()
    with receivers(stack, old) as (warm,):  # a delivery now: the delivery function has read (and keeps) the key
        stack.cli("submit", "warms the delivery function", "--webhook", f"{warm.url}/warm", "--json", check=True)
        assert warm.delivery_for("/warm") is not None

    rotated = stack.cli("webhooks", "rotate", "--grace-hours", "24", check=True)
    # The GET is served by an execution environment that reads the key now (on AWS: any environment started after
    # the rotation), while the delivery function stays warm with the key it read before: its configuration is untouched.
    lambda_ = aws_client(stack, "lambda")
    (api,) = [f["FunctionName"] for f in lambda_.list_functions()["Functions"] if "-ApiFunction" in f["FunctionName"]]
    environment = lambda_.get_function_configuration(FunctionName=api)["Environment"]
    variables = {**environment.get("Variables", {}), "WEBHOOK_KEY_CACHE_SECONDS": "300"}  # the default, explicitly
    lambda_.update_function_configuration(FunctionName=api, Environment={"Variables": variables})
    view = _view(stack)
    new = view["secret"]
    assert new != old and view["previous_secret"] == old, view
    expected = _expected_signers(view)
    assert "until" in rotated.stdout

    with receivers(stack, old, new) as (old_receiver, new_receiver):
        to_old = stack.cli("submit", "right after the rotation (old receiver)", "--webhook",
                           f"{old_receiver.url}/after-old", "--json", check=True)  # fmt: skip
        to_new = stack.cli("submit", "right after the rotation (new receiver)", "--webhook",
                           f"{new_receiver.url}/after-new", "--json", check=True)  # fmt: skip
        got = old_receiver.delivery_for("/after-old")
        assert got is not None, "the old secret did not verify a delivery made right after the rotation"
        assert got["signatures"] == len(expected), (got, view)  # what the view said is what was sent
        if new in expected:
            assert new_receiver.delivery_for("/after-new") is not None
        else:  # the new secret does not sign yet, as the view says: the receiver refuses, the job records it
            assert new_receiver.refusals("/after-new", DELIVERY_TIMEOUT_S), "no delivery reached the new receiver"
            job_id = json.loads(to_new.stdout)["job_id"]
            state = wait_for(
                lambda: (d := _job_delivery(stack, job_id)).get("last_status") == 401 and d, 30, "the 401 recorded"
            )
            assert state["outcome"] == "rejected" and state["delivered_at"] is None
    assert json.loads(to_old.stdout)["job_id"]
    assert view["signing"] == ["previous_secret"] and view["secret_signs_from"], view  # switches once all have read it


def _job_delivery(stack: LocalStack, job_id: str) -> dict[str, Any]:
    job = json.loads(stack.cli("status", job_id, "--json", check=True).stdout)
    return ((job.get("webhook") or {}).get("deliveries") or {}).get("job.succeeded") or {}


def test_attempts_the_stack_cannot_sign_are_recorded_on_the_job(stack: LocalStack, master_key_restored: None) -> None:
    """The single secret of before per-caller secrets (no "use" marker) signs nothing until an operator rotates it;
    meanwhile the caller sees the attempts and why, not an empty ``deliveries``."""
    lambda_ = aws_client(stack, "lambda")
    names = [
        f["FunctionName"]
        for f in lambda_.list_functions()["Functions"]
        if "-WebhookDeliveryFunction" in f["FunctionName"]
    ]
    for name in names:  # a fresh environment reads the key now (not a cached good one)
        environment = lambda_.get_function_configuration(FunctionName=name)["Environment"]
        variables = {**environment.get("Variables", {}), "WEBHOOK_KEY_CACHE_SECONDS": "1"}
        lambda_.update_function_configuration(FunctionName=name, Environment={"Variables": variables})
    manager = aws_client(stack, "secretsmanager")
    disclosed = uuid.uuid4().hex + uuid.uuid4().hex[:12]
    manager.put_secret_value(
        SecretId=stack.outputs["OMNIREEL_WEBHOOK_SIGNING_SECRET_ARN"], SecretString=json.dumps({"key": disclosed})
    )
    with receivers(stack, stack.outputs["OMNIREEL_WEBHOOK_SECRET"]) as (receiver,):
        submitted = stack.cli("submit", "a job while the key is refused", "--webhook", f"{receiver.url}/unsigned",
                              "--json", check=True)  # fmt: skip
        job_id = json.loads(submitted.stdout)["job_id"]
        state = wait_for(lambda: _job_delivery(stack, job_id), DELIVERY_TIMEOUT_S, "the unsigned attempt recorded")
        assert state["outcome"] == "not_signed" and state["attempts"] >= 1, state
        assert state["last_status"] is None and state["delivered_at"] is None and not state["refused"]
        assert "signing key" in state["last_error"] and disclosed not in json.dumps(state)
        assert receiver.drain_accepted() == []  # nothing was sent
