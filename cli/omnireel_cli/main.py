"""``omnireel``: run omnireel jobs against the embedded local stack (default) or a deployed stack.

Exit codes: 0 ok, 1 job failed, 2 usage error, 3 stack not running / infrastructure error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import jobs, local_stack
from .errors import EXIT_INFRA, EXIT_USAGE, CliError, UsageError
from .target import Target

DEFAULT_PROMPT = "a paper boat drifting down a rainy city street, cinematic, golden hour reflections"


def _target(args: argparse.Namespace) -> Target:
    if getattr(args, "stack", None):
        return Target.deployed(args.stack, args.region)
    return Target.local_stack()


def _add_job_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--frames", type=int, help="video frames (4k+1, default 17)")
    parser.add_argument("--steps", type=int, help="video inference steps (default 30)")
    parser.add_argument("--size", help="video WIDTHxHEIGHT (default 480x320)")
    parser.add_argument("--fps", type=int, help="video frames per second (default 8)")
    parser.add_argument("--seed", type=int, help="seed for image and video")
    parser.add_argument("--image-size", help="image WIDTHxHEIGHT (default 1024x1024)")
    parser.add_argument("--image-steps", type=int, help="image inference steps (default 4)")
    parser.add_argument("--timeout", type=float, default=600.0, help="max seconds to wait for the job (default 600)")


def _request(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    return jobs.build_request(
        prompt,
        frames=args.frames,
        steps=args.steps,
        size=args.size,
        seed=args.seed,
        fps=args.fps,
        image_size=args.image_size,
        image_steps=args.image_steps,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omnireel", description=__doc__.splitlines()[0])
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--stack", help="a deployed stack name (default: the local stack)")
    target.add_argument("--region", help="region of --stack (default: AWS_REGION)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    local = commands.add_parser("local", help="the embedded local stack: up | down | status | env")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    up = local_commands.add_parser("up", help="start the local stack in the background and wait until it is ready")
    up.add_argument("--moto-port", type=int, default=0, help="local AWS port (default: a free port)")
    up.add_argument("--api-port", type=int, default=0, help="HTTP API port (default: a free port)")
    up.add_argument("--parameter", action="append", default=[], metavar="NAME=VALUE", help="template parameter")
    up.add_argument("--relay", action="store_true", help="also start the TTS relay and a speech emulator")
    up.add_argument("--timeout", type=float, default=90.0, help="max seconds to wait for readiness (default 90)")
    local_commands.add_parser("down", help="stop the local stack and every process it started")
    local_commands.add_parser("status", help="is it running, where, which processes")
    local_commands.add_parser("env", help="KEY=VALUE lines for the AWS CLI / boto3 / the API (eval-able)")

    submit = commands.add_parser("submit", parents=[target], help="submit a prompt through the HTTP API")
    submit.add_argument("prompt")
    _add_job_options(submit)
    submit.add_argument("--wait", action="store_true", help="wait until the job succeeds or fails")
    submit.add_argument("--out", type=Path, help="with --wait: download image.png and video.mp4 into OUT/<job id>/")
    submit.add_argument("--idempotency-key", help="Idempotency-Key header (retries return the same job)")
    submit.add_argument("--json", action="store_true", help="print JSON")

    drop = commands.add_parser("drop", parents=[target], help="put a prompt file (.txt / .json) into the inbox bucket")
    drop.add_argument("file", type=Path)
    drop.add_argument("--key", help="object key (default prompts/<file name>)")
    drop.add_argument("--wait", action="store_true", help="wait for the job the file starts")
    drop.add_argument("--out", type=Path, help="with --wait: download the artifacts into OUT/<job id>/")
    drop.add_argument("--timeout", type=float, default=600.0)
    drop.add_argument("--json", action="store_true")

    status = commands.add_parser("status", parents=[target], help="a job's status, stage timings and artifacts")
    status.add_argument("job_id")
    status.add_argument("--json", action="store_true")

    events = commands.add_parser("events", parents=[target], help="job events as a subscriber receives them")
    events.add_argument("--follow", "-f", action="store_true", help="keep listening (Ctrl-C to stop)")
    events.add_argument("--timeout", type=float, help="with --follow: stop after this many seconds")
    events.add_argument("--json", action="store_true", help="one JSON event per line")

    demo = commands.add_parser("demo", parents=[target], help="local up + one prompt -> image -> video job")
    demo.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT)
    _add_job_options(demo)
    demo.add_argument("--out", type=Path, default=Path("out"), help="output folder (default out/)")
    demo.add_argument("--down", action="store_true", help="stop the local stack afterwards")
    demo.set_defaults(timeout=180.0)
    return parser


# ---------------------------------------------------------------- commands
def cmd_local(args: argparse.Namespace) -> int:
    if args.local_command == "up":
        state = local_stack.up(
            moto_port=args.moto_port,
            api_port=args.api_port,
            parameters=args.parameter,
            timeout=args.timeout,
            relay=args.relay,
        )
        print("\n".join(local_stack.env_lines(state)))
        return 0
    if args.local_command == "down":
        local_stack.down()
        return 0
    if args.local_command == "status":
        ready, lines = local_stack.status_lines(local_stack.running_state())
        print("\n".join(lines))
        return 0 if ready else EXIT_INFRA
    state = Target.local_stack().state
    print("\n".join(local_stack.env_lines(state)))
    return 0


def _finish(target: Target, job_id: str, args: argparse.Namespace) -> int:
    job = jobs.wait(target, job_id, args.timeout)
    if args.out:
        for path in jobs.download(job, args.out / job_id).values():
            print(f"saved {path}", file=sys.stderr)
    print(json.dumps(job, indent=2) if args.json else "\n".join(jobs.describe(job)))
    jobs.raise_if_failed(job)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    if args.out and not args.wait:
        raise UsageError("--out needs --wait")
    target = _target(args)
    accepted = jobs.submit(target, _request(args, args.prompt), args.idempotency_key)
    if not args.wait:
        print(json.dumps(accepted) if args.json else accepted["job_id"])
        return 0
    print(f"submitted job {accepted['job_id']}", file=sys.stderr)
    return _finish(target, accepted["job_id"], args)


def cmd_drop(args: argparse.Namespace) -> int:
    target = _target(args)
    uri = jobs.drop(target, args.file, args.key)
    if not args.wait:
        print(uri)
        return 0
    print(f"uploaded {uri}", file=sys.stderr)
    job_id, inbox_status = jobs.job_of_dropped(target, uri, timeout=min(args.timeout, 60))
    print(f"job {job_id} ({inbox_status})", file=sys.stderr)
    return _finish(target, job_id, args)


def cmd_status(args: argparse.Namespace) -> int:
    job = jobs.get_job(_target(args), args.job_id)
    print(json.dumps(job, indent=2) if args.json else "\n".join(jobs.describe(job)))
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    return jobs.events(_target(args), args.follow, args.json, args.timeout)


def _video_facts(path: Path) -> str:
    try:
        import av

        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            frames = sum(1 for _ in container.decode(stream))
            codec = stream.codec_context
            return f"{frames} frames {codec.width}x{codec.height} {codec.name}"
    except Exception as exc:  # noqa: BLE001 - a description only
        return f"(not decoded: {exc})"


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if not args.stack:
        local_stack.up()
    target = _target(args)
    tap = jobs.EventTap(target)
    try:
        accepted = jobs.submit(target, _request(args, args.prompt))
        job_id = accepted["job_id"]
        print(f"submitted job {job_id}: {args.prompt!r}", file=sys.stderr)
        job = jobs.wait(target, job_id, args.timeout)
        event = jobs.wait_for_event(tap.sqs, tap.url, job_id, timeout=20)
    finally:
        tap.close()
    directory = args.out / job_id
    saved = jobs.download(job, directory)
    if event is not None:
        (directory / "event.json").write_text(json.dumps(event, indent=2) + "\n")
        saved["event"] = directory / "event.json"
    print("\n".join(jobs.describe(job)))
    for name, path in saved.items():
        facts = f"  ({_video_facts(path)})" if name == "video" else ""
        print(f"  {name + ' file':<24} {path}{facts}")
    if event is None:
        print("  (no job event received within 20 s)", file=sys.stderr)
    print(f"demo finished in {time.monotonic() - started:.1f} s", file=sys.stderr)
    if args.down and not args.stack:
        local_stack.down()
    elif not args.stack:
        print("the local stack keeps running: `omnireel local down` stops it", file=sys.stderr)
    jobs.raise_if_failed(job)
    if "video" in saved:
        print(f"video: {saved['video']}")
    return 0


COMMANDS = {
    "local": cmd_local,
    "submit": cmd_submit,
    "drop": cmd_drop,
    "status": cmd_status,
    "events": cmd_events,
    "demo": cmd_demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except CliError as exc:
        print(f"omnireel: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("omnireel: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
