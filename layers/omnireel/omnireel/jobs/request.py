"""The job request: what an app asks for, validated with messages a person can act on.

The request types are frozen ``msgspec`` structs; ``parse_job_request`` checks a decoded JSON value against the
field rules below (``_IMAGE``, ``_VIDEO``, ``_REQUEST``: one line per field) and lists every problem at once, in field
order, with the wording the API has always used (pydantic's, from when these were pydantic models in strict mode:
``prompt: Field required``, ``seed: Input should be greater than or equal to 0``; ``tests/corpus/api/cases.json`` pins
it). msgspec's own validation stops at the first problem and words it differently, hence this small checker;
``tests/unit/jobs/test_request_oracle.py`` compares it with the former pydantic model, kept as a test-only oracle.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import msgspec

from omnireel.core.bounded import MAX_ECHO_CHARS, bounded
from omnireel.core.errors import InvalidRequest
from omnireel.events.event_types import DEFAULT_WEBHOOK_EVENTS, WEBHOOK_EVENT_TYPES

MAX_PROMPT_CHARS = 2000
_SIZE = re.compile(r"^(\d{2,4})x(\d{2,4})$")

MAX_WEBHOOK_URL_CHARS = 2048
DEFAULT_MAX_QUEUE_SECONDS = 3600  # a job not admitted within an hour ends expired (docs/capacity.md)
MAX_QUEUE_SECONDS = 86400


class ImageOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of the real-time image call (FLUX.2-klein)."""

    size: str = "1024x1024"  # WIDTHxHEIGHT, each 256..2048 and a multiple of 16
    num_inference_steps: int = 4

    @property
    def width(self) -> int:
        return int(self.size.split("x")[0])

    @property
    def height(self) -> int:
        return int(self.size.split("x")[1])


class VideoOptions(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Parameters of the async video call (Wan2.1-VACE), sent as multipart text parts."""

    width: int = 480
    height: int = 320
    num_frames: int = 17  # 4k+1 frames, as Wan2.1 expects
    fps: int = 8
    num_inference_steps: int = 30
    prompt: str | None = None  # the motion prompt of the video call (default: the job's prompt)
    negative_prompt: str | None = None  # the video call's negative prompt (default: the job's negative_prompt)


class JobRequest(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A prompt and everything that shapes the image and the video made from it."""

    prompt: str
    negative_prompt: str | None = None
    seed: int | None = None
    guidance_scale: float = 5.0
    image: ImageOptions = msgspec.field(default_factory=ImageOptions)
    video: VideoOptions = msgspec.field(default_factory=VideoOptions)
    webhook: str | None = None  # https URL that receives this job's events, signed (Standard Webhooks)
    # which events the webhook receives (default: job.succeeded, job.failed, job.cancelled)
    webhook_events: list[str] | None = None
    # how long the job may wait for its first slot on the model endpoints (omnireel.admission) before it ends
    # ``expired`` without any model call; null: DEFAULT_MAX_QUEUE_SECONDS
    max_queue_seconds: int | None = None

    @property
    def queue_limit_seconds(self) -> int:
        return self.max_queue_seconds or DEFAULT_MAX_QUEUE_SECONDS

    def webhook_wants(self, event_type: str) -> bool:
        """Does this job's webhook (if any) receive ``event_type``?"""
        if self.webhook is None:
            return False
        return event_type in (self.webhook_events or DEFAULT_WEBHOOK_EVENTS)


# ------------------------------------------------------------------------------------------------ value rules
_INVISIBLE = {"Cc", "Cf", "Zs", "Zl", "Zp"}


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _check_prompt(value: str) -> str:
    # Blank includes invisible-only text (zero-width spaces, BOMs, control characters).
    if all(ch.isspace() or unicodedata.category(ch) in _INVISIBLE for ch in value):
        raise ValueError("must not be blank")
    return _no_nul(value)


def _check_size(value: str) -> str:
    match = _SIZE.fullmatch(value)
    if not match:
        raise ValueError("must look like 1024x1024")
    for side in (int(match[1]), int(match[2])):
        if not 256 <= side <= 2048 or side % 16:
            raise ValueError("each side must be 256..2048 and a multiple of 16")
    return value


def _wan_frame_count(value: int) -> int:
    if (value - 1) % 4:
        raise ValueError("must be 4k+1 (5, 9, 13, 17, ..., 161)")
    return value


def _distinct_events(value: list[str]) -> list[str]:
    if len(set(value)) != len(value):
        raise ValueError("must not repeat an event type")
    return value


def check_webhook_url(value: str) -> str:
    """The URL's shape (no network here): http(s), a host, no credentials, no fragment, printable ASCII.

    Which schemes and hosts a deployment accepts, and where the host resolves, is checked when a job is submitted and
    again at every delivery (``omnireel.webhooks.target``)."""
    if not value.isascii() or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("must be an absolute http(s) URL of printable ASCII characters (percent-encode the rest)")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ValueError("must be an absolute https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("must not carry credentials (user:password@)")
    if parts.fragment or value.endswith("#"):
        raise ValueError("must not have a #fragment")
    if port == 0:
        raise ValueError("has an invalid port")
    return value


# ------------------------------------------------------------------------------------------------ field rules
class _Invalid(Exception):
    """One problem at ``loc`` (field names from the request's root)."""

    def __init__(self, loc: tuple[str, ...], message: str):
        super().__init__(message)
        self.loc, self.message = loc, message


class _Rule:
    """One field: its kind (``str``, ``int``, ``float``, ``events``: a list of webhook event types, or a nested
    field table), whether it is required, may be null, its bounds and a last check (raises ``ValueError``).
    Checks run in the order pydantic-core ran them: type, multiple_of, le, ge, length, then the last check."""

    __slots__ = ("check", "ge", "kind", "le", "max_length", "min_length", "multiple_of", "nullable", "required")

    def __init__(
        self,
        kind: str | _Table,
        *,
        required: bool = False,
        nullable: bool = False,
        ge: float | None = None,
        le: float | None = None,
        multiple_of: int | None = None,
        min_length: int | None = None,
        max_length: int | None = None,
        check: Callable[[Any], Any] | None = None,
    ):
        self.kind, self.required, self.nullable, self.check = kind, required, nullable, check
        self.ge, self.le, self.multiple_of = ge, le, multiple_of
        self.min_length, self.max_length = min_length, max_length


class _Table:
    """The rules of one struct's fields, in field order."""

    def __init__(self, struct: type[msgspec.Struct], rules: dict[str, _Rule]):
        assert tuple(rules) == struct.__struct_fields__, struct
        self.struct, self.rules = struct, rules


_IMAGE = _Table(
    ImageOptions,
    {
        "size": _Rule("str", check=_check_size),
        "num_inference_steps": _Rule("int", ge=1, le=50),
    },
)
_VIDEO = _Table(
    VideoOptions,
    {
        "width": _Rule("int", ge=128, le=1280, multiple_of=16),
        "height": _Rule("int", ge=128, le=1280, multiple_of=16),
        "num_frames": _Rule("int", ge=5, le=161, check=_wan_frame_count),
        "fps": _Rule("int", ge=1, le=30),
        "num_inference_steps": _Rule("int", ge=1, le=100),
        "prompt": _Rule("str", nullable=True, min_length=1, max_length=MAX_PROMPT_CHARS, check=_check_prompt),
        "negative_prompt": _Rule("str", nullable=True, max_length=MAX_PROMPT_CHARS, check=_no_nul),
    },
)
_REQUEST = _Table(
    JobRequest,
    {
        "prompt": _Rule("str", required=True, min_length=1, max_length=MAX_PROMPT_CHARS, check=_check_prompt),
        "negative_prompt": _Rule("str", nullable=True, max_length=MAX_PROMPT_CHARS, check=_no_nul),
        "seed": _Rule("int", nullable=True, ge=0, le=2**32 - 1),
        "guidance_scale": _Rule("float", ge=0, le=20),
        "image": _Rule(_IMAGE),
        "video": _Rule(_VIDEO),
        "webhook": _Rule("str", nullable=True, max_length=MAX_WEBHOOK_URL_CHARS, check=check_webhook_url),
        "webhook_events": _Rule(
            "events", nullable=True, min_length=1, max_length=len(WEBHOOK_EVENT_TYPES), check=_distinct_events
        ),
        "max_queue_seconds": _Rule("int", nullable=True, ge=1, le=MAX_QUEUE_SECONDS),
    },
)
_EVENT_CHOICES = ", ".join(f"'{name}'" for name in WEBHOOK_EVENT_TYPES[:-1]) + f" or '{WEBHOOK_EVENT_TYPES[-1]}'"


_NOT_UNICODE = "Input should be a valid string, unable to parse raw data as a unicode string"


def _encodable(text: str) -> bool:
    """False for text with a lone surrogate (JSON ``"\\ud800"``), which pydantic-core refused as not unicode."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _number(rule: _Rule, value: Any, loc: tuple[str, ...]) -> int | float:
    """A strict int (bool is not one) or a finite float (an int is accepted and becomes a float), within bounds."""
    if rule.kind == "int":
        if type(value) is not int:
            raise _Invalid(loc, "Input should be a valid integer")
        number: int | float = value
    else:
        if type(value) is int:
            try:
                number = float(value)
            except OverflowError:
                raise _Invalid(loc, "Input should be a valid number") from None
        elif type(value) is float:
            number = value
        else:
            raise _Invalid(loc, "Input should be a valid number")
        if not math.isfinite(number):
            raise _Invalid(loc, "Input should be a finite number")
    if rule.multiple_of is not None and number % rule.multiple_of:
        raise _Invalid(loc, f"Input should be a multiple of {rule.multiple_of}")
    if rule.le is not None and number > rule.le:
        raise _Invalid(loc, f"Input should be less than or equal to {rule.le}")
    if rule.ge is not None and number < rule.ge:
        raise _Invalid(loc, f"Input should be greater than or equal to {rule.ge}")
    return number


def _value(rule: _Rule, value: Any, loc: tuple[str, ...], problems: list[_Invalid]) -> Any:
    """``value`` checked against ``rule``; raises ``_Invalid`` (or adds nested problems and raises ``_Nested``)."""
    if value is None and rule.nullable:
        return None
    kind = rule.kind
    if isinstance(kind, _Table):
        if type(value) is not dict:
            raise _Invalid(loc, f"Input should be a valid dictionary or instance of {kind.struct.__name__}")
        return _struct(kind, value, loc, problems)
    if kind == "str":
        if type(value) is not str:
            raise _Invalid(loc, "Input should be a valid string")
        if (rule.min_length is not None or rule.max_length is not None) and not _encodable(value):
            raise _Invalid(loc, _NOT_UNICODE)  # pydantic-core looked at the text only to measure it
        if rule.min_length is not None and len(value) < rule.min_length:
            raise _Invalid(loc, f"String should have at least {_plural(rule.min_length, 'character')}")
        if rule.max_length is not None and len(value) > rule.max_length:
            raise _Invalid(loc, f"String should have at most {_plural(rule.max_length, 'character')}")
    elif kind == "events":
        if type(value) is not list:
            raise _Invalid(loc, "Input should be a valid list")
        if rule.max_length is not None and len(value) > rule.max_length:
            raise _Invalid(
                loc, f"List should have at most {_plural(rule.max_length, 'item')} after validation, not {len(value)}"
            )
        bad = [_Invalid((*loc, str(i)), _NOT_UNICODE if type(item) is str and not _encodable(item) else
                        f"Input should be {_EVENT_CHOICES}")
               for i, item in enumerate(value) if type(item) is not str or item not in WEBHOOK_EVENT_TYPES]  # fmt: skip
        if bad:
            problems.extend(bad)
            raise _Nested
        if rule.min_length is not None and len(value) < rule.min_length:
            raise _Invalid(
                loc, f"List should have at least {_plural(rule.min_length, 'item')} after validation, not {len(value)}"
            )
        value = list(value)
    else:
        value = _number(rule, value, loc)
    if rule.check is not None:
        try:
            rule.check(value)
        except ValueError as exc:
            raise _Invalid(loc, str(exc)) from None
    return value


class _Nested(Exception):
    """A nested value's problems were added to the list already."""


def _struct(table: _Table, data: dict[Any, Any], loc: tuple[str, ...], problems: list[_Invalid]) -> Any:
    """The struct of ``table`` from ``data``; its problems are added to ``problems`` (then ``_Nested`` is raised)."""
    if not all(_encodable(key) for key in data if isinstance(key, str)):
        raise _Invalid(loc, _NOT_UNICODE)  # a key that is not text fails the whole object, as in pydantic-core
    before = len(problems)
    values: dict[str, Any] = {}
    for name, rule in table.rules.items():
        if name not in data:
            if rule.required:
                problems.append(_Invalid((*loc, name), "Field required"))
            continue
        try:
            values[name] = _value(rule, data[name], (*loc, name), problems)
        except _Invalid as problem:
            problems.append(problem)
        except _Nested:
            pass
    for key in data:
        if key not in table.rules:
            message = "unknown field" if isinstance(key, str) else "Keys should be strings"
            problems.append(_Invalid((*loc, str(key)), message))
    if len(problems) > before:
        raise _Nested
    return table.struct(**values)


# A 400 lists its problems one by one as data too, within a byte budget beside the (bounded) message, so the whole
# answer stays small however many problems the request has (the message lists them all, bounded).
MAX_PROBLEMS_BYTES = 768


def _where(problem: _Invalid) -> str:
    return ".".join(bounded(part, MAX_ECHO_CHARS) for part in problem.loc) or "request"


def _describe(problems: list[_Invalid]) -> str:
    """Every problem, ``path: message``; field names (caller input) and the whole text are bounded."""
    return bounded("; ".join(f"{_where(problem)}: {bounded(problem.message, 200)}" for problem in problems))


def _invalid(problems: list[_Invalid]) -> InvalidRequest:
    """The 400: every problem in the message, and as many as fit ``MAX_PROBLEMS_BYTES`` as ``{"field", "message"}``
    (``problems_omitted``: how many did not)."""
    listed: list[dict[str, str]] = []
    size = 0
    for problem in problems:
        item = {"field": _where(problem), "message": bounded(problem.message, 200)}
        size += len(item["field"].encode()) + len(item["message"].encode()) + 30  # 30: the JSON around them
        if size > MAX_PROBLEMS_BYTES:
            break
        listed.append(item)
    return InvalidRequest(_describe(problems), problems=listed, problems_omitted=len(problems) - len(listed))


def parse_job_request(data: Any, *, default_video_steps: int | None = None) -> JobRequest:
    """Validate a decoded JSON value; raise ``InvalidRequest`` with every problem listed.

    ``default_video_steps`` (the deployment profile's ``DEFAULT_VIDEO_STEPS``) fills
    ``video.num_inference_steps`` when the request does not set it.
    """
    if not isinstance(data, dict):
        raise _invalid([_Invalid((), "the request must be a JSON object")])
    if default_video_steps is not None:
        video = data.get("video", {})
        if isinstance(video, dict) and "num_inference_steps" not in video:
            data = {**data, "video": {**video, "num_inference_steps": default_video_steps}}
    problems: list[_Invalid] = []
    try:
        request: JobRequest = _struct(_REQUEST, data, (), problems)
    except _Invalid as problem:
        raise _invalid([problem]) from None
    except _Nested:
        raise _invalid(problems) from None
    if request.webhook_events is not None and request.webhook is None:
        raise _invalid([_Invalid((), "webhook_events needs a webhook")])
    return request


def parse_job_request_json(raw: str | bytes, *, default_video_steps: int | None = None) -> JobRequest:
    """Validate a JSON document (API body or inbox ``.json`` file)."""
    return parse_job_request(decode_json_document(raw), default_video_steps=default_video_steps)


def decode_json_document(raw: str | bytes) -> Any:
    """The JSON value of a request document; ``InvalidRequest`` if it is not UTF-8 or not JSON."""
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"the request is not valid UTF-8 (byte {exc.start})") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidRequest(bounded(f"the request is not valid JSON: {exc}")) from exc
    except RecursionError:
        raise InvalidRequest("the request is not valid JSON: nested too deeply") from None
    return data


def numeric_bounds(path: tuple[str, ...]) -> tuple[float | None, float | None, int | None] | None:
    """``(at least, at most, multiple of)`` of the number field at ``path`` (``("video", "width")`` -> ``(128, 1280,
    16)``), None for a field that is not a number: for callers that check a value before sending it (the CLI's flags)
    and must name every bound, from the rules the API applies."""
    table = _REQUEST
    for part in path[:-1]:
        kind = table.rules[part].kind
        if not isinstance(kind, _Table):
            return None
        table = kind
    rule = table.rules.get(path[-1])
    if rule is None or rule.kind not in ("int", "float"):
        return None
    return rule.ge, rule.le, rule.multiple_of
