"""The job request fields as CLI flags: one row per field of ``omnireel.jobs.request.JobRequest``.

``submit`` and ``demo`` get every row as a flag; ``build_request`` puts what was given at the row's place in the
request body and leaves the rest to the API's defaults. A new API field is one new row (a unit test checks that every
field of the request model has a flag).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from .errors import UsageError


@dataclass(frozen=True)
class JobField:
    flag: str  # --negative-prompt
    path: tuple[str, ...]  # where it goes in the request body: ("negative_prompt",), ("video", "fps")
    type: type
    help: str
    metavar: str | None = None
    repeat: bool = False  # a list field: the flag may be given several times


JOB_FIELDS: list[JobField] = [
    JobField("--negative-prompt", ("negative_prompt",), str, "what to keep out of image and video", "TEXT"),
    JobField("--seed", ("seed",), int, "seed for image and video (0 .. 2^32-1; default random)"),
    JobField("--guidance-scale", ("guidance_scale",), float, "classifier-free guidance, 0 .. 20 (default 5.0)"),
    JobField(
        "--image-size", ("image", "size"), str, "image WIDTHxHEIGHT, sides 256..2048, x16 (default 1024x1024)", "WxH"
    ),
    JobField("--image-steps", ("image", "num_inference_steps"), int, "image inference steps, 1..50 (default 4)"),
    JobField("--width", ("video", "width"), int, "video width, 128..1280, x16 (default 480)"),
    JobField("--height", ("video", "height"), int, "video height, 128..1280, x16 (default 320)"),
    JobField("--frames", ("video", "num_frames"), int, "video frames, 4k+1 in 5..161 (default 17)"),
    JobField("--fps", ("video", "fps"), int, "video frames per second, 1..30 (default 8)"),
    JobField("--video-prompt", ("video", "prompt"), str, "motion prompt of the video call (default: PROMPT)", "TEXT"),
    JobField(
        "--video-negative-prompt", ("video", "negative_prompt"), str, "negative prompt of the video call only", "TEXT"
    ),
    JobField(
        "--webhook", ("webhook",), str, "https URL that receives the job's events, signed (Standard Webhooks)", "URL"
    ),
    JobField(
        "--webhook-event",
        ("webhook_events",),
        str,
        "an event type the webhook receives (repeatable; default: job.succeeded, job.failed, job.cancelled, "
        "job.expired)",
        "TYPE",
        repeat=True,
    ),
    JobField(
        "--max-queue-seconds",
        ("max_queue_seconds",),
        int,
        "how long the job may wait for a GPU slot before it ends expired, nothing rendered or billed (1..86400; "
        "default 3600)",
        "SECONDS",
    ),
    JobField(
        "--steps",
        ("video", "num_inference_steps"),
        int,
        "video inference steps, 1..100 (default: the stack's profile, 30; dev: 4)",
    ),
]


def _dest(field: JobField) -> str:
    return "job_" + field.flag.removeprefix("--").replace("-", "_")


def _metavar(field: JobField) -> str:
    """What the help shows for the flag's value: the row's own, else the flag's name (``--frames FRAMES``), never
    the internal ``dest`` (``JOB_FRAMES``)."""
    return field.metavar or field.flag.removeprefix("--").replace("-", "_").upper()


def _bounded(field: JobField) -> Any:
    """The flag's ``type``: the value parsed, and checked against the bounds the API applies to its field (from the
    domain's own rules), so a refusal names every bound (``at least 128, at most 1280 and a multiple of 16``) before
    any call, where the API names only the first one broken. A text flag has none (``numeric_bounds`` is None for a
    field that is not a number). The rules are read when a numeric flag is given, not when the parser is built: they
    live in the request model (msgspec), ~20 ms of every command otherwise."""
    if field.type not in (int, float):
        return field.type

    def parse(text: str) -> Any:
        from omnireel.jobs.request import numeric_bounds

        try:
            value = field.type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a{'n integer' if field.type is int else ' number'}"
            ) from None
        low, high, multiple = numeric_bounds(field.path) or (None, None, None)
        if (
            (low is not None and value < low)
            or (high is not None and value > high)
            or (multiple is not None and value % multiple)
        ):
            rules = [
                f"{words} {int(bound) if float(bound).is_integer() else bound}"
                for words, bound in (("at least", low), ("at most", high), ("a multiple of", multiple))
                if bound is not None
            ]
            wording = ", ".join(rules[:-1]) + " and " + rules[-1] if len(rules) > 1 else rules[0]
            raise argparse.ArgumentTypeError(f"{text} is out of bounds: it must be {wording}")
        return value

    parse.__name__ = field.type.__name__  # argparse names the type in its own messages
    return parse


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """Every job field as a flag (plus ``--size`` for the video's WIDTHxHEIGHT)."""
    group = parser.add_argument_group("job request (unset flags take the API's defaults)")
    for field in JOB_FIELDS:
        action = "append" if field.repeat else "store"
        group.add_argument(
            field.flag, dest=_dest(field), type=_bounded(field), help=field.help, metavar=_metavar(field), action=action
        )
    group.add_argument("--size", metavar="WxH", help="video WIDTHxHEIGHT (same as --width/--height; default 480x320)")


def request_from_args(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    """The POST /jobs body from the parsed flags (only the fields that were given)."""
    values = {field.path: getattr(args, _dest(field), None) for field in JOB_FIELDS}
    size = getattr(args, "size", None)
    if size:
        if values[("video", "width")] is not None or values[("video", "height")] is not None:
            raise UsageError("give either --size or --width/--height, not both")
        try:
            width, height = (int(x) for x in size.lower().split("x"))
        except ValueError as exc:
            raise UsageError(f"--size must look like 480x320, got {size!r}") from exc
        values[("video", "width")], values[("video", "height")] = width, height
    return build_request(prompt, values)


def build_request(prompt: str, values: dict[tuple[str, ...], Any]) -> dict[str, Any]:
    request: dict[str, Any] = {"prompt": prompt}
    for path, value in values.items():
        if value is None:
            continue
        node = request
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return request
