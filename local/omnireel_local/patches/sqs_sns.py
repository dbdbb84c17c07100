"""SNS and SQS: SNS -> Lambda asynchronous with the real event, SQS's 12-hour visibility rule from the receive, message
sizes in bytes as SQS counts them, the characters SQS allows in a body, and the fault hooks on deliveries and sends."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .. import fault_injection
from .cards import FAULT_HOOK, MOTO_BUG, Context, Patch, iso_now


def install_sns_to_lambda(ctx: Context) -> None:
    from moto.sns.models import Subscription

    invoker = ctx.invoker
    original_publish = Subscription.publish

    def publish(self: Any, message: str, message_id: str, subject: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.protocol != "lambda":
            return original_publish(self, message, message_id, subject, *args, **kwargs)
        attributes = kwargs.get("message_attributes") or (args[0] if args else None) or {}
        if self._filter_policy_matcher is not None and not self._filter_policy_matcher.matches(attributes, message):
            return None
        from moto.awslambda.utils import get_backend

        parts = self.endpoint.split(":")
        qualifier = parts[7] if len(parts) == 8 else None
        fn = get_backend(self.account_id, parts[3]).get_function(parts[6], qualifier)
        event = {
            "Records": [
                {
                    "EventSource": "aws:sns",
                    "EventVersion": "1.0",
                    "EventSubscriptionArn": self.arn,
                    "Sns": {
                        "Type": "Notification",
                        "MessageId": message_id,
                        "TopicArn": self.topic.arn,
                        "Subject": subject,
                        "Message": message,
                        "Timestamp": iso_now(),
                        "SignatureVersion": "1",
                        "Signature": "LOCAL",
                        "SigningCertUrl": "http://localhost/local.pem",
                        "UnsubscribeUrl": f"http://localhost/?Action=Unsubscribe&SubscriptionArn={self.arn}",
                        # moto has already turned DataType/StringValue into SNS's delivered Type/Value.
                        "MessageAttributes": attributes,
                    },
                }
            ]
        }
        invoker.submit(fn, json.dumps(event), f"sns:{self.topic.arn}")
        return None

    Subscription.publish = publish


def install_visibility_limit(ctx: Context) -> None:
    patch_sqs_visibility_limit()


def install_message_sizes(ctx: Context) -> None:
    patch_sqs_message_sizes()


def install_message_characters(ctx: Context) -> None:
    patch_sqs_message_characters()


def install_fault_hooks(ctx: Context) -> None:
    patch_sqs_fault_hooks()


SQS_MAX_VISIBILITY_S = 43200  # a message's visibility ends at most 12 hours after the receive (AWS)


def patch_sqs_visibility_limit(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 27 (see ``apply``): each receipt handle remembers when its receive happened, and ChangeMessageVisibility
    refuses a timeout ending more than ``SQS_MAX_VISIBILITY_S`` after it, with AWS's error."""

    from moto.core.utils import unix_time_millis
    from moto.sqs.exceptions import InvalidParameterValue, ReceiptHandleIsInvalid
    from moto.sqs.models import Message, SQSBackend

    original_received = Message.mark_received
    if getattr(original_received, "omnireel_receive_times", False):
        return

    def mark_received(self: Any, visibility_timeout: int | None = None) -> None:
        original_received(self, visibility_timeout)
        times = self.__dict__.setdefault("omnireel_received_ms", {})
        times[self.receipt_handle] = unix_time_millis()

    def change_message_visibility(self: Any, queue_name: str, receipt_handle: str, visibility_timeout: int) -> None:
        queue = self.get_queue(queue_name)
        for message in queue._messages:
            if not message.had_receipt_handle(receipt_handle):
                continue
            received_ms = message.__dict__.get("omnireel_received_ms", {}).get(receipt_handle)
            if received_ms is None:  # received before the patch (cannot happen in the stack): moto's send time
                received_ms = message.sent_timestamp
            if unix_time_millis() + int(visibility_timeout) * 1000 - received_ms > SQS_MAX_VISIBILITY_S * 1000:
                raise InvalidParameterValue(
                    f"Value {visibility_timeout} for parameter VisibilityTimeout is invalid. Reason: Total "
                    f"VisibilityTimeout for the message is beyond the limit [{SQS_MAX_VISIBILITY_S} seconds]"
                )
            message.change_visibility(visibility_timeout)
            if message.visible and message in queue.pending_messages:
                queue.pending_messages.remove(message)
            return
        raise ReceiptHandleIsInvalid

    def change_message_visibility_batch(self: Any, queue_name: str, entries: list[dict[str, Any]]) -> Any:
        success, failed = [], []
        for entry in entries:
            try:
                timeout = int(entry["VisibilityTimeout"])
                if not 0 <= timeout <= SQS_MAX_VISIBILITY_S:
                    raise ValueError(timeout)
            except (KeyError, TypeError, ValueError):
                failed.append({"Id": entry.get("Id"), "SenderFault": True, "Code": "InvalidParameterValue",
                               "Message": "Visibility timeout invalid"})  # fmt: skip
                continue
            try:
                self.change_message_visibility(queue_name, entry["ReceiptHandle"], timeout)
            except (InvalidParameterValue, ReceiptHandleIsInvalid) as exc:
                failed.append({"Id": entry["Id"], "SenderFault": True, "Code": exc.code, "Message": exc.message})
            else:
                success.append(entry["Id"])
        return success, failed

    mark_received.omnireel_receive_times = True  # type: ignore[attr-defined]
    set_attribute(Message, "mark_received", mark_received)
    set_attribute(SQSBackend, "change_message_visibility", change_message_visibility)
    set_attribute(SQSBackend, "change_message_visibility_batch", change_message_visibility_batch)


# SQS's documented limits (docs/decisions.md "Batch queue payloads"): a queue that does not set MaximumMessageSize
# takes 262,144 bytes (256 KiB; CreateQueue's attribute reference); a SendMessageBatch's messages together (the sum of
# their sizes) at most 1,048,576 bytes (1 MiB; the SendMessageBatch reference).
SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE = 262_144
SQS_MAXIMUM_BATCH_BYTES = 1_048_576


def sqs_message_size(body: str, attributes: dict[str, Any] | None) -> int:
    """A message's size as SQS counts it: the body's UTF-8 bytes plus, per message attribute, its name, data type and
    value (string: UTF-8 bytes; binary: the bytes)."""

    def size(value: Any) -> int:
        if value is None:
            return 0
        return len(value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value))

    total = size(body)
    for name, attribute in (attributes or {}).items():
        total += size(name) + size(attribute.get("DataType"))
        total += size(attribute.get("StringValue")) + size(attribute.get("BinaryValue"))
    return total


def patch_sqs_message_sizes(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 29 (see ``apply``): SendMessage refuses a message over the queue's MaximumMessageSize
    (``InvalidParameterValue``, AWS's code and wording) counted in bytes; SendMessageBatch refuses a call whose
    messages together exceed 1 MiB (``BatchRequestTooLong``) and, like SendMessage, any entry over the queue's limit;
    a queue created without MaximumMessageSize gets AWS's default, 262,144 bytes."""

    from moto.sqs.exceptions import BatchRequestTooLong, InvalidParameterValue
    from moto.sqs.models import Queue, SQSBackend

    if getattr(SQSBackend.send_message_batch, "omnireel_sizes", False):
        return
    original_init = Queue.__init__
    original_send = SQSBackend.send_message
    original_batch = SQSBackend.send_message_batch

    def init(self: Any, name: str, region: str, account_id: str, **kwargs: Any) -> None:
        kwargs.setdefault("MaximumMessageSize", SQS_DEFAULT_MAXIMUM_MESSAGE_SIZE)
        original_init(self, name, region, account_id, **kwargs)

    def check(queue: Any, body: str, attributes: dict[str, Any] | None) -> None:
        limit = int(queue.maximum_message_size)
        if sqs_message_size(body, attributes) > limit:
            raise InvalidParameterValue(
                f"One or more parameters are invalid. Reason: Message must be shorter than {limit} bytes."
            )

    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        attributes = kwargs.get("message_attributes", args[0] if args else None)
        check(self.get_queue(queue_name), message_body, attributes)
        return original_send(self, queue_name, message_body, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        sizes = [sqs_message_size(e["MessageBody"], e.get("MessageAttributes")) for e in entries.values()]
        if sum(sizes) > SQS_MAXIMUM_BATCH_BYTES:
            raise BatchRequestTooLong(sum(sizes))  # moto's wording names its 1 MiB constant, AWS's limit
        return original_batch(self, queue_name, entries)  # each entry goes through send_message (checked above)

    send_message_batch.omnireel_sizes = True  # type: ignore[attr-defined]
    set_attribute(Queue, "__init__", init)
    set_attribute(SQSBackend, "send_message", send_message)
    set_attribute(SQSBackend, "send_message_batch", send_message_batch)


# The characters SQS allows in a message body (SendMessage's MessageBody reference, the W3C XML 1.0 Char production):
# #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF. Anything else -- C0 controls, lone surrogates,
# U+FFFE, U+FFFF -- is refused with InvalidMessageContents.
SQS_ALLOWED_CHARACTERS = "#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF"
_SQS_DISALLOWED = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_BATCH_ENTRY_ID = re.compile(r"^[\w-]{1,80}$")


def sqs_disallowed_character(body: str) -> str | None:
    """The first character of ``body`` SQS refuses in a message body, or None."""
    found = _SQS_DISALLOWED.search(body)
    return found.group() if found else None


def sqs_character_message(character: str) -> str:
    return (f"Invalid binary character '#x{ord(character):X}' was found in the message body, the set of allowed "
            f"characters is {SQS_ALLOWED_CHARACTERS}")  # fmt: skip


def patch_sqs_message_characters(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 29b (see ``apply``): a body with a character outside SQS's set is refused as AWS refuses it.
    SendMessage: the call fails, 400 ``InvalidMessageContents`` (one of SendMessage's modelled errors).
    SendMessageBatch: that entry fails (``Failed``: ``InvalidMessageContents``, SenderFault) and the others are sent --
    the error is not among SendMessageBatch's modelled errors, and each entry's result is reported on its own. The
    whole-call refusals (more than 10 entries, bad or repeated ids, over 1 MiB in all) still come first."""
    from moto.sqs.exceptions import SQSException
    from moto.sqs.models import SQSBackend

    if getattr(SQSBackend.send_message_batch, "omnireel_characters", False):
        return
    original_send = SQSBackend.send_message
    original_batch = SQSBackend.send_message_batch

    class InvalidMessageContents(SQSException):
        def __init__(self, character: str) -> None:
            super().__init__("InvalidMessageContents", sqs_character_message(character))

    def send_message(self: Any, queue_name: str, message_body: str, *args: Any, **kwargs: Any) -> Any:
        character = sqs_disallowed_character(message_body)
        if character is not None:
            self.get_queue(queue_name)  # QueueDoesNotExist first, as for any send
            raise InvalidMessageContents(character)
        return original_send(self, queue_name, message_body, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, entries: dict[str, dict[str, Any]]) -> Any:
        refused = {key: c for key, e in entries.items() if (c := sqs_disallowed_character(e["MessageBody"]))}
        ids = [str(e.get("Id")) for e in entries.values()]
        whole_call_refused = (
            len(entries) > 10
            or len(set(ids)) != len(ids)
            or not all(_BATCH_ENTRY_ID.match(i) for i in ids)
            or sum(sqs_message_size(e["MessageBody"], e.get("MessageAttributes")) for e in entries.values())
            > SQS_MAXIMUM_BATCH_BYTES
        )
        if not refused or whole_call_refused:
            return original_batch(self, queue_name, entries)  # sent as is, or refused as a whole first
        self.get_queue(queue_name)
        failed = [{"Id": entries[key]["Id"], "SenderFault": True, "Code": "InvalidMessageContents",
                   "Message": sqs_character_message(character)} for key, character in refused.items()]  # fmt: skip
        rest = {key: entry for key, entry in entries.items() if key not in refused}
        messages, more_failed = original_batch(self, queue_name, rest) if rest else ([], [])
        return messages, failed + list(more_failed)

    send_message_batch.omnireel_characters = True  # type: ignore[attr-defined]
    set_attribute(SQSBackend, "send_message", send_message)
    set_attribute(SQSBackend, "send_message_batch", send_message_batch)


def patch_sqs_fault_hooks(set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
    """Patch 30 (see ``apply``): SNS -> SQS deliveries may be dropped and sends refused, as fault_injection.py says."""
    from moto.core.exceptions import AWSError
    from moto.sns.models import Subscription
    from moto.sqs.models import SQSBackend

    if getattr(Subscription.publish, "omnireel_delivery_faults", False):
        return
    original_publish = Subscription.publish
    original_send = SQSBackend.send_message
    original_batch = SQSBackend.send_message_batch

    def publish(self: Any, message: str, message_id: str, subject: str | None = None, *args: Any, **kwargs: Any) -> Any:
        if self.protocol == "sqs":
            attributes = kwargs.get("message_attributes") or (args[0] if args else None) or {}
            matcher = self._filter_policy_matcher
            if (matcher is None or matcher.matches(attributes, message)) and fault_injection.drop_sqs_delivery(
                self.endpoint.split(":")[-1]
            ):
                return None
        return original_publish(self, message, message_id, subject, *args, **kwargs)

    def refuse(queue_name: str) -> None:
        if fault_injection.sqs_send_failure(queue_name):
            raise AWSError("Rate exceeded (injected)", exception_type="RequestThrottled", status=400)

    def send_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        refuse(queue_name)
        return original_send(self, queue_name, *args, **kwargs)

    def send_message_batch(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        refuse(queue_name)
        return original_batch(self, queue_name, *args, **kwargs)

    publish.omnireel_delivery_faults = True  # type: ignore[attr-defined]
    set_attribute(Subscription, "publish", publish)
    set_attribute(SQSBackend, "send_message", send_message)
    set_attribute(SQSBackend, "send_message_batch", send_message_batch)


CARDS = [
    Patch(
        "5",
        "SNS -> Lambda: asynchronous, with the real event",
        aws="SNS invokes the function asynchronously (retries, on-failure destination) with the topic ARN, message "
        "id and message attributes.",
        moto="Invokes synchronously inside Publish with a fake event (TopicArn arn:aws:sns:EXAMPLE, a fixed "
        "MessageId); a function that calls back into the server can deadlock.",
        test="tests/e2e/test_pipeline.py::test_api_path_produces_a_decodable_mp4",
        upstream=MOTO_BUG,
        installs=install_sns_to_lambda,
    ),
    Patch(
        "27",
        "ChangeMessageVisibility: 12 hours from the receive",
        aws="A new timeout may end at most 43,200 s after the receive that produced the receipt handle "
        "(InvalidParameterValue), per entry in the batch call.",
        moto="Measures the 12 hours from the message's send.",
        test="tests/unit/local/test_sqs_visibility_limit.py::test_the_limit_runs_from_the_receive_not_the_send",
        upstream=MOTO_BUG,
        installs=install_visibility_limit,
    ),
    Patch(
        "29",
        "SQS sizes in bytes, default MaximumMessageSize 262,144",
        aws="Body plus attribute names, types and values in UTF-8 bytes, at most MaximumMessageSize (262,144 by "
        "default); a SendMessageBatch at most 1,048,576 bytes (BatchRequestTooLong).",
        moto="Counts characters and defaults MaximumMessageSize to 1 MiB.",
        test="tests/unit/local/test_sqs_message_sizes.py::test_the_default_limit_is_262144_bytes_counted_in_utf8",
        upstream=MOTO_BUG,
        installs=install_message_sizes,
    ),
    Patch(
        "29b",
        "SQS refuses characters outside its set in a message body",
        aws="A body may hold only #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF. SendMessage "
        "fails 400 InvalidMessageContents; in SendMessageBatch that entry fails (InvalidMessageContents, SenderFault) "
        "and the others are sent.",
        moto="Accepts any character (a raw U+FFFE, U+FFFF, a C0 control, a lone surrogate) and delivers it.",
        test="tests/unit/local/test_sqs_message_characters.py::test_send_message_refuses_a_character_outside_the_set",
        upstream=MOTO_BUG,
        installs=install_message_characters,
    ),
    Patch(
        "30",
        "Fault hooks on SNS -> SQS deliveries and SQS sends (off by default)",
        aws="(A platform fault: a lost delivery, a throttled send.)",
        moto="No way to inject them.",
        test="tests/e2e/test_batch_limits.py::test_a_lost_terminal_event_does_not_stall_the_batch",
        upstream=FAULT_HOOK,
        installs=install_fault_hooks,
    ),
]
