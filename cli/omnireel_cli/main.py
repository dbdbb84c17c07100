"""``omnireel``: run omnireel jobs against the embedded local stack (default) or a deployed stack.

Exit codes: 0 ok, 1 job failed (or a smoke check / utterance failed), 2 usage error (also: the relay refused the
token), 3 stack not running / infrastructure error (unreachable API or relay, timeouts).
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from . import invocation, job_options, vocabulary
from .errors import EXIT_INFRA, EXIT_JOB_FAILED, EXIT_USAGE, CliError, UsageError

if TYPE_CHECKING:
    from .target import Target


def _lazy(name: str) -> ModuleType:
    """``omnireel_cli.<name>``, executed on first attribute access (importlib's ``LazyLoader``).

    A command loads only the modules it uses: ``--version``, ``--help``, ``local status`` and ``events`` never import
    botocore, and no command imports the smoke test's, the TTS client's or preflight's dependencies unless it runs them.
    """
    full = f"{__package__}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.find_spec(full)
    assert spec is not None and spec.loader is not None, full
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


batches, invoke, jobs, local_stack = _lazy("batches"), _lazy("invoke"), _lazy("jobs"), _lazy("local_stack")
preflight, smoke, target, tts = _lazy("preflight"), _lazy("smoke"), _lazy("target"), _lazy("tts")

DEFAULT_PROMPT = "a paper boat drifting down a rainy city street, cinematic, golden hour reflections"


def _target(args: argparse.Namespace) -> Target:
    if getattr(args, "stack", None):
        return target.Target.deployed(args.stack, args.region)
    return target.Target.local_stack()


def _add_job_options(parser: argparse.ArgumentParser) -> None:
    job_options.add_job_options(parser)
    # %(default)g: a command may set its own default (demo: 180 s), and the help says that one
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="max seconds to wait for the job (default %(default)g)"
    )


def _request(args: argparse.Namespace, prompt: str) -> dict[str, Any]:
    return job_options.request_from_args(args, prompt)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("omnireel")
    except PackageNotFoundError:
        return "unknown (not installed: run `make venv`)"


class _VersionAction(argparse.Action):
    """``--version``: reads the installed version only when asked (importlib.metadata and its scan of the installed
    distributions cost every command ~40 ms of CPU otherwise: the tests run the CLI hundreds of times)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None):
        super().__init__(option_strings, dest=dest, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        parser._print_message(f"omnireel {_version()}\n", sys.stdout)
        parser.exit()


class Parser(argparse.ArgumentParser):
    """argparse with a suggestion for a mistyped command or option (``omnireel sumbit`` -> did you mean submit?)."""

    argv: Sequence[str] = ()  # what main() parses: finds the (sub)command whose options to suggest from

    def error(self, message: str) -> Any:  # type: ignore[override]
        suggestion = self._suggest(message)
        text = message + (f"\n{suggestion}" if suggestion else "")
        # argparse reports an unknown option from the top-level parser (subparsers hand extras back up): show the
        # usage of the (sub)command that was given, whose options the suggestion comes from, not `omnireel COMMAND`.
        command = _command_parser(self, self.argv) if message.startswith("unrecognized arguments") else self
        if command is not self:
            command.print_usage(sys.stderr)
            command.exit(2, f"{command.prog}: error: {text}\n")
        super().error(text)

    def _suggest(self, message: str) -> str | None:
        choice = re.search(r"invalid choice: '([^']*)'", message)
        if choice:
            choices = [c for a in self._actions if a.choices for c in a.choices]  # type: ignore[union-attr]
            close = difflib.get_close_matches(choice[1], [str(c) for c in choices], n=3, cutoff=0.6)
        else:
            unknown = re.search(r"unrecognized arguments: (\S+)", message)
            if not unknown or not unknown[1].startswith("-"):
                return None
            options = {o for a in _command_parser(self, self.argv)._actions for o in a.option_strings}
            close = difflib.get_close_matches(unknown[1].split("=")[0], sorted(options), n=2, cutoff=0.6)
        return f"did you mean: {', '.join(close)}?" if close else None


def _command_parser(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The innermost subcommand parser that ``argv`` names (``local up`` -> the parser of ``up``)."""
    for token in argv:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is not None and token in sub.choices:
            parser = sub.choices[token]
    return parser


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _all_parsers(sub)
    return found


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="omnireel", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action=_VersionAction, help="print the version")
    target = argparse.ArgumentParser(add_help=False)
    target.add_argument("--stack", help="a deployed stack name (default: the local stack)")
    target.add_argument("--region", help="region of --stack (default: AWS_REGION)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)

    local = commands.add_parser("local", help="the embedded local stack: up | down | status | env")
    local_commands = local.add_subparsers(dest="local_command", required=True, metavar="ACTION", parser_class=Parser)
    up = local_commands.add_parser("up", help="start the local stack in the background and wait until it is ready")
    up.add_argument("--moto-port", type=int, help="local AWS port (default 4710 if free, 0 = any free port)")
    up.add_argument("--api-port", type=int, help="HTTP API port (default 4711 if free, 0 = any free port)")
    up.add_argument(
        "--ephemeral-ports", action="store_true",
        help="a free port for every part instead of the fixed defaults 4710.. (tests, several stacks at once)",
    )  # fmt: skip
    up.add_argument("--parameter", action="append", default=[], metavar="NAME=VALUE", help="template parameter")
    relay = up.add_mutually_exclusive_group()
    relay.add_argument(
        "--no-relay", dest="relay", action="store_false", default=None,
        help="do not start the TTS relay (by default it starts in front of the TTS model's emulator, with a fresh "
        "token; `omnireel local env` prints OMNIREEL_RELAY_URL and OMNIREEL_RELAY_TOKEN)",
    )  # fmt: skip
    relay.add_argument(
        "--relay", dest="relay", action="store_true",
        help="start the relay even if the template has no TTS model (EnableVoice=false): a speech emulator serves it",
    )  # fmt: skip
    up.add_argument("--timeout", type=float, default=90.0, help="max seconds to wait for readiness (default 90)")
    local_commands.add_parser("down", help="stop the local stack and every process it started")
    local_commands.add_parser("status", help="is it running, where, which processes")
    local_commands.add_parser("env", help="KEY=VALUE lines for the AWS CLI / boto3 / the API (eval-able)")

    submit = commands.add_parser("submit", parents=[target], help="submit a prompt through the HTTP API")
    submit.add_argument("prompt", help="what to make (1..2000 characters)")
    _add_job_options(submit)
    submit.add_argument("--wait", action="store_true", help="wait until the job succeeds or fails")
    submit.add_argument("--out", type=Path, help="with --wait: download image.png and video.mp4 into OUT/<job id>/")
    submit.add_argument(
        "--idempotency-key",
        help="Idempotency-Key header: the same key (and body) returns the same job. Default: a new key per submit, "
        "printed, so the CLI's own retries never create a second job",
    )
    submit.add_argument("--json", action="store_true", help="print JSON")

    drop = commands.add_parser(
        "drop", parents=[target], help="put a prompt file (.txt / .json) into the inbox bucket, print its job id",
        description="Upload FILE under prompts/ in the inbox bucket (the S3 trigger), wait (at most --pickup-timeout) "
        "until the inbox function has tagged the uploaded version with its job, and print the job id. A file the "
        "inbox cannot read by its type (not .txt / .json) is refused before anything is uploaded. Exit 1 if the "
        "inbox rejected the file (the job failed: the reason is printed).",
    )  # fmt: skip
    drop.add_argument("file", type=Path, help="a .txt file (the prompt) or a .json file (a full job request)")
    drop.add_argument("--key", help="object key, under prompts/ (default prompts/<file name>)")
    drop.add_argument("--wait", action="store_true", help="wait until the job succeeds or fails")
    drop.add_argument("--out", type=Path, help="with --wait: download the artifacts into OUT/<job id>/")
    drop.add_argument(
        "--pickup-timeout", type=float, default=30.0,
        help="max seconds to wait for the inbox function to take the file (default 30)",
    )  # fmt: skip
    drop.add_argument("--timeout", type=float, default=600.0, help="with --wait: max seconds for the job (default 600)")
    drop.add_argument("--json", action="store_true", help="print JSON (the job with --wait, else job id and upload)")

    status = commands.add_parser("status", parents=[target], help="a job's status, stage timings and artifacts")
    status.add_argument("job_id", help="the job id (from submit, drop or an event)")
    status.add_argument("--json", action="store_true", help="print the job as JSON (GET /jobs/{id})")

    listing = commands.add_parser("jobs", parents=[target], help="your jobs, newest first (GET /jobs)")
    listing.add_argument("--status", help="only jobs in this status (e.g. rendering_video, succeeded, cancelled)")
    listing.add_argument("--limit", type=int, default=20, help="jobs per page (1-100, default 20)")
    listing.add_argument("--all", action="store_true", help="follow next_cursor through every page")
    listing.add_argument("--cursor", help="start at this next_cursor of an earlier listing")
    listing.add_argument("--json", action="store_true", help="print the API's JSON page(s)")

    usage = commands.add_parser(
        "usage", parents=[target], help="your usage per day (GET /usage); --all: every caller's (operators)",
        description="Your own jobs' usage per UTC day: jobs by outcome, model seconds, estimated cost (an estimate: "
        "no idle instances, storage, Lambda, Step Functions, data transfer), and your pending jobs against "
        "CallerMaxPendingJobs. --all reads every caller's from the stack's usage table with your own AWS "
        "credentials (dynamodb:Scan on it; no API route shows other callers).",
    )  # fmt: skip
    usage.add_argument("--from", dest="from_date", help="first UTC day, YYYY-MM-DD (default: 30 days before --to)")
    usage.add_argument("--to", dest="to_date", help="last UTC day, YYYY-MM-DD (default: today); at most 366 days")
    usage.add_argument("--all", action="store_true", help="every caller (operators: reads the usage table)")
    usage.add_argument("--json", action="store_true", help="print JSON")

    cancel = commands.add_parser(
        "cancel", parents=[target], help="cancel a job (DELETE /jobs/{id}); a queued video render still runs",
        description="Stop a job you submitted: its execution stops and it ends `cancelled` with one job.cancelled "
        "event. SageMaker async inference has no cancel: a video render already queued still runs and is billed "
        "(its result is discarded). A job that had already succeeded or failed is refused (exit 2).",
    )  # fmt: skip
    cancel.add_argument("job_id", help="the job id (yours: submitted through the API with your identity)")
    cancel.add_argument("--json", action="store_true", help="print the API's answer as JSON")

    hooks = commands.add_parser("webhooks", help="signed webhooks: a local receiver that verifies, the secret")
    hook_commands = hooks.add_subparsers(dest="webhooks_command", required=True, metavar="ACTION")
    listen = hook_commands.add_parser(
        "listen", parents=[target], help="receive webhooks on 127.0.0.1, verify their signatures, print them",
        description="A receiver for local development: POSTs to http://127.0.0.1:PORT/ are verified with the "
        "Standard Webhooks scheme (webhook-id, webhook-timestamp, webhook-signature; HMAC-SHA256 with the whsec_ "
        "secret; timestamps within 5 minutes) and printed; a verified delivery gets 204, anything else 401. Submit "
        "jobs with \"webhook\": \"http://127.0.0.1:PORT/\" (the local stack allows http to loopback). "
        "Secret: --secret, "
        "else OMNIREEL_WEBHOOK_SECRET, else GET /webhooks/secret.",
    )  # fmt: skip
    listen.add_argument("--port", type=int, default=8787, help="port on 127.0.0.1 (default 8787; 0 = any free)")
    listen.add_argument("--secret", help="the whsec_ secret (default: OMNIREEL_WEBHOOK_SECRET or the API)")
    listen.add_argument("--count", type=int, help="exit after this many verified deliveries")
    listen.add_argument("--timeout", type=float, help="exit after this many seconds (exit 1 if --count not reached)")
    listen.add_argument("--fail-first", type=int, default=0, help="answer the first N verified deliveries 503")
    listen.add_argument("--json", action="store_true", help="one JSON line per verified delivery")
    hook_secret = hook_commands.add_parser(
        "secret", parents=[target], help="print your whsec_ signing secret (GET /webhooks/secret)",
        description="Your own whsec_ secret: it signs the deliveries of the jobs and batches you submit, and no other "
        "caller's. --unowned (operators: reads the master key from Secrets Manager) prints the secret that signs the "
        "deliveries of dropped files' jobs and batches, which have no owner; the API never serves it.",
    )  # fmt: skip
    hook_secret.add_argument("--unowned", action="store_true", help="the dropped files' secret (operators only)")
    hook_secret.add_argument("--json", action="store_true", help="also the previous secret during a rotation")
    rotate = hook_commands.add_parser(
        "rotate", parents=[target], help="rotate the webhook master key (operators): both keys sign for a grace period",
        description="Writes a new webhook master key (Secrets Manager PutSecretValue: operators only). Every "
        "caller's secret changes; during the grace period each delivery carries two signatures (the new and the "
        "previous secret: receivers holding either verify) and GET /webhooks/secret shows both; then only the new "
        "one signs. Functions pick the new key up within 5 minutes: switch receivers after that and before the "
        "grace period ends. --grace-hours 0 stops the old key at once (a leaked key).",
    )  # fmt: skip
    rotate.add_argument("--grace-hours", type=float, default=24.0,
                        help="how long the previous key keeps signing (default 24; 0, or 1 to 720)")  # fmt: skip
    rotate.add_argument("--end-grace", action="store_true",
                        help="no new key: end the running grace period now (only the current key signs)")  # fmt: skip
    rotate.add_argument("--force", action="store_true", help="rotate even while a grace period is still running")

    events = commands.add_parser(
        "events", parents=[target], help="job events as a subscriber receives them (a replayable log locally)",
        description="Local stack: every job event the stack's subscription (an SQS queue on the job-events topic) "
        "has received since `local up`, oldest first; running it again shows them again (the CLI keeps them in "
        "<home>/events.jsonl). --follow then waits for new ones. Deployed stack: --follow subscribes a temporary "
        "queue and shows the events from now on.",
    )  # fmt: skip
    events.add_argument("--follow", "-f", action="store_true", help="after the log, wait for new events (Ctrl-C)")
    events.add_argument("--job", metavar="JOB_ID", help="only the events of this job")
    events.add_argument("--timeout", type=float, help="with --follow: stop after this many seconds")
    events.add_argument("--json", action="store_true", help="one JSON event per line")

    batch = commands.add_parser(
        "batch",
        parents=[target],
        help="run a JSONL file of job requests as one batch: `batch FILE.jsonl [--wait]` | `batch status ID`",
    )
    batch.add_argument("what", nargs="+", metavar="FILE.jsonl | status ID", help="a .jsonl file, or: status BATCH_ID")
    batch.add_argument("--wait", action="store_true", help="wait until every job is terminal (batch.completed)")
    batch.add_argument("--api", action="store_true", help="send it as POST /batches (<= 1,000 lines) instead of a drop")
    batch.add_argument("--key", help="inbox object key (default prompts/<file name>)")
    batch.add_argument("--timeout", type=float, default=3600.0, help="with --wait: give up after this many seconds")
    batch.add_argument("--json", action="store_true", help="print the batch as JSON")

    demo = commands.add_parser("demo", parents=[target], help="local up + one prompt -> image -> video job")
    demo.add_argument("prompt", nargs="?", default=DEFAULT_PROMPT, help="what to make (default: a paper boat ...)")
    _add_job_options(demo)
    demo.add_argument("--out", type=Path, default=Path("out"), help="output folder (default out/)")
    demo.add_argument("--down", action="store_true", help="stop the local stack afterwards")
    demo.set_defaults(timeout=180.0)

    speak = commands.add_parser(
        "tts", parents=[target], help="speak TEXT through the TTS relay into a 24 kHz mono 16-bit WAV",
        description="Stream one utterance through the TTS relay (vLLM-Omni streaming-TTS protocol: session.config "
        "with pcm + stream_audio, input.text, input.done, session.close), write the PCM chunks into a WAV as they "
        "arrive, check audio.done.total_bytes, and print the time to first audio (input.done -> first PCM frame). "
        "Relay: --url/--token, else --stack (RelayUrl output + RelayTokenSecretArn secret), else the local stack. "
        "Exit codes: 0 ok, 1 the relay reported an error / bad audio, 2 usage or token refused (HTTP 401), "
        "3 relay unreachable / timeout.",
    )  # fmt: skip
    speak.add_argument("text", nargs="?", help="what to say (not needed with --open)")
    speak.add_argument(
        "--open", action="store_true",
        help="open the relay's web page in a browser with the token filled in (it travels in the URL fragment, "
        "which is never sent to the server) instead of speaking TEXT",
    )  # fmt: skip
    speak.add_argument("--out", type=Path, default=Path("speech.wav"), help="WAV file to write (default speech.wav)")
    speak.add_argument("--voice", help="voice / speaker (e.g. vivian); default: the model's")
    speak.add_argument("--language", help="language (e.g. English, Chinese, Auto); default: the model's")
    speak.add_argument("--url", help="relay WebSocket URL (overrides the stack's)")
    speak.add_argument("--token", help="relay bearer token (overrides the stack's)")
    speak.add_argument("--timeout", type=float, default=60.0, help="max seconds for the whole utterance (default 60)")
    speak.add_argument("--json", action="store_true", help="print the result as JSON")

    ui = commands.add_parser(
        "ui", parents=[target], help="a page on loopback: submit, watch stages, play the MP4, cancel, list, batches",
        description="Serve a page on loopback (default http://127.0.0.1:8092/) to submit a prompt, watch its stages "
        "live, see the image, play the MP4, cancel it, list your jobs and follow a batch's counts. The page calls "
        "this process, which calls the API through the Python client as you (the local stack, or --stack). "
        "Runs until Ctrl-C.",
    )  # fmt: skip
    ui.add_argument("--listen", default="127.0.0.1:8092", help="loopback HOST:PORT (default 127.0.0.1:8092; :0 = any)")

    proxy = commands.add_parser(
        "tts-proxy", parents=[target], help="loopback forwarder that adds the relay token (for header-less clients)",
        description="Listen on a loopback WebSocket (default ws://127.0.0.1:8091/v1/audio/speech/stream) and forward "
        "every connection to the TTS relay with its bearer token added, frames unchanged both ways: for vLLM-Omni "
        "clients that cannot set headers (e.g. the stock example client's plain websockets.connect(url)). "
        "Relay: --url/--token, else --stack, else the local stack. Runs until Ctrl-C.",
    )  # fmt: skip
    proxy.add_argument("--listen", default="127.0.0.1:8091", help="loopback HOST:PORT (default 127.0.0.1:8091)")
    proxy.add_argument("--url", help="relay WebSocket URL (overrides the stack's)")
    proxy.add_argument("--token", help="relay bearer token (overrides the stack's)")

    check = commands.add_parser(
        "smoke", parents=[target], help="post-deploy check: one image, one 4-step video job, one TTS utterance",
        description="The check to run right after `sam deploy` (or against the local stack): (a) one image request "
        "straight to the image endpoint -> validation-output.png, (b) one 4-step video job through the HTTP API -> "
        "validation-output.mp4 (decoded: frames and size), (c) one utterance through the TTS relay -> "
        "validation-output.wav (skipped if the stack has no voice). The checks run concurrently; one PASS/FAIL/SKIP "
        "line each with timings, then a verdict. Exit 0 only if none failed (1 otherwise, 3 if the stack is not "
        "reachable). A video endpoint scaled to zero takes about 10 minutes to wake: --timeout covers it.",
    )  # fmt: skip
    check.add_argument("--out", type=Path, default=Path("out"), help="folder for validation-output.* (default out/)")
    check.add_argument("--prompt", default=vocabulary.SMOKE_PROMPT, help="prompt for the image and the video")
    check.add_argument("--image-size", default="1024x1024", help="image WIDTHxHEIGHT (default 1024x1024)")
    check.add_argument(
        "--timeout", type=float, default=1200.0,
        help="max seconds for the video job (default 1200: covers a wake-up from zero instances)",
    )  # fmt: skip
    check.add_argument("--tts-timeout", type=float, default=60.0, help="max seconds for the utterance (default 60)")
    check.add_argument(
        "--skip", action="append", default=[], choices=vocabulary.CHECKS, metavar="CHECK",
        help="leave out a check: image, video or tts (repeatable)",
    )  # fmt: skip
    run = commands.add_parser(
        "invoke", parents=[target], help="invoke one Lambda function with a sample event from events/",
        description="Invoke FUNCTION (folder name like generate_image, logical id or physical name) once with an "
        "event file, as the developer identity, and print its result (exit 1 if the function failed). The sample "
        "events in events/ use {{placeholders}} for the job id, buckets, topics, execution and task token; they are "
        "filled from a real job of the stack (--job, default the latest). Placeholders: "
        + "; ".join(f"{name}: {meaning}" for name, meaning in vocabulary.PLACEHOLDERS.items()),
    )  # fmt: skip
    run.add_argument("function", metavar="FUNCTION", help="e.g. generate_image, GenerateImageFunction")
    run.add_argument("--event", type=Path, help="event JSON file (default events/<FUNCTION>.json)")
    run.add_argument("--job", metavar="JOB_ID", help="fill the placeholders from this job (default: the latest job)")
    run.add_argument(
        "--set", action="append", default=[], metavar="NAME=VALUE", help="fill or override one placeholder"
    )
    run.add_argument("--json", action="store_true", help="print function, job id, function error and result as JSON")

    logs = commands.add_parser(
        "logs", help="the local stack's logs, the job id on every line: [FUNCTION|lambda|stack|emulator|relay] [-f]",
        description="Show the local stack's logs (<home>/logs/), each line as SOURCE JOB LINE. SOURCE: a Lambda "
        "function (generate_image, its logical id or physical name), lambda (all functions), stack (supervisor, "
        "local AWS, front door, SageMaker shim, hot reload), emulator (all container emulators) or emulator-<model>, "
        "relay; default all. JOB is the job the line belongs to (Lambda lines always carry it), - for lines about "
        "no job (start-up, schedules, TTS sessions).",
    )  # fmt: skip
    logs.add_argument("source", nargs="?", metavar="SOURCE", help="FUNCTION, lambda, stack, emulator or relay")
    logs.add_argument("--job", metavar="JOB_ID", help="only the lines of this job")
    logs.add_argument("--follow", "-f", action="store_true", help="then keep printing what the logs append")
    logs.add_argument("--tail", type=int, metavar="N", help="only the last N lines of each log first")
    logs.add_argument("--timeout", type=float, help="with --follow: stop after this many seconds")

    aws = commands.add_parser(
        "aws", help="the AWS CLI against the local stack, as the developer identity (like awslocal)",
        description="Run `aws ARGS...` with the local stack's endpoint, region and developer key (no eval needed, "
        "AWS_PROFILE and real credentials are kept out): `omnireel aws s3 ls`, `omnireel aws stepfunctions "
        "list-executions --state-machine-arn ...`. The AWS CLI comes from .venv-aws (`make aws-cli`), else PATH, "
        "else OMNIREEL_AWS_CLI. Its exit code is passed through.",
    )  # fmt: skip
    aws.add_argument("aws_args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the AWS CLI")

    pre = commands.add_parser(
        "preflight", help="before sam deploy: template rules, name lengths, the DLC tag, voice network (make deploy)",
        description="Checks what would otherwise fail only after the SageMaker endpoints spent 20-60 minutes starting: "
        "the template's Rules with the profile's parameters, the stack name (lower case; the inbox bucket "
        "<stack>-inbox-<account>-<region> must fit 63 characters), and - with AWS credentials for the target "
        "account - that the DLC image tag exists in the region, and (voice on) the subnets, certificate and relay "
        "image. Exit 0 if everything passes, 2 otherwise.",
    )  # fmt: skip
    pre.add_argument("--config-env", default="dev", help="samconfig.toml profile (default dev)")
    pre.add_argument("--region", required=True, help="target region")
    pre.add_argument("--stack-name", help="stack name (default: the profile's)")
    pre.add_argument(
        "--parameter", action="append", default=[], metavar="NAME=VALUE",
        help="a parameter override on top of the profile's (repeatable)",
    )  # fmt: skip
    pre.add_argument("--offline", action="store_true", help="template and names only (no AWS calls)")
    return parser


# ---------------------------------------------------------------- commands
def cmd_local(args: argparse.Namespace) -> int:
    if args.local_command == "up":
        state = local_stack.up(
            moto_port=args.moto_port,
            api_port=args.api_port,
            ephemeral_ports=args.ephemeral_ports,
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
    state = target.Target.local_stack().state
    print("\n".join(local_stack.env_lines(state)))
    return 0


def _finish(target: Target, job: Any, args: argparse.Namespace) -> int:
    job = jobs.wait(target, job, args.timeout)
    if args.out:
        for path in jobs.download(target, job, args.out / job.job_id).values():
            print(f"saved {path}", file=sys.stderr)
    print(json.dumps(job.raw, indent=2) if args.json else "\n".join(jobs.describe(job)))
    jobs.raise_if_failed(job)
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    if args.out and not args.wait:
        raise UsageError("--out needs --wait")
    target = _target(args)
    accepted = jobs.submit(target, _request(args, args.prompt), args.idempotency_key)
    if not args.wait:
        if not args.json:
            print(f"idempotency key {accepted.idempotency_key}", file=sys.stderr)
        print(json.dumps(jobs.accepted_view(accepted)) if args.json else accepted.job_id)
        return 0
    print(f"submitted job {accepted.job_id} (idempotency key {accepted.idempotency_key})", file=sys.stderr)
    return _finish(target, accepted, args)


def cmd_drop(args: argparse.Namespace) -> int:
    if args.out and not args.wait:
        raise UsageError("--out needs --wait")
    jobs.check_drop(args.file, args.key)  # refused before looking up the stack or uploading
    target = _target(args)
    uri, version_id = jobs.drop(target, args.file, args.key)
    print(f"uploaded {uri}" + (f" (version {version_id})" if version_id else ""), file=sys.stderr)
    job_id, inbox_status = jobs.job_of_dropped(target, uri, timeout=args.pickup_timeout, version_id=version_id)
    print(f"job {job_id} ({inbox_status})", file=sys.stderr)
    if args.wait:
        return _finish(target, job_id, args)
    print(json.dumps({"job_id": job_id, "inbox_status": inbox_status, "uri": uri, "version_id": version_id})
          if args.json else job_id)  # fmt: skip
    if inbox_status == "rejected":
        jobs.raise_if_failed(jobs.get_job(target, job_id))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    job = jobs.get_job(_target(args), args.job_id)
    print(json.dumps(job.raw, indent=2) if args.json else "\n".join(jobs.describe(job)))
    return 0


def cmd_jobs(args: argparse.Namespace) -> int:
    target = _target(args)
    cursor, pages = args.cursor, 0
    while True:
        page = jobs.list_jobs(target, args.status, args.limit, cursor)
        pages += 1
        if args.json:
            print(json.dumps(page.raw))
        else:
            for job in page.raw.get("jobs") or []:
                prompt = (job.get("prompt") or "")[:60]
                print(f"{job['job_id']}  {job['status']:<16} {job['created_at']}  {prompt}")
        cursor = page.next_cursor
        if not cursor or not args.all:
            break
    if cursor and not args.json:
        print(f"more: omnireel jobs --cursor {cursor}" + (f" --status {args.status}" if args.status else ""),
              file=sys.stderr)  # fmt: skip
    return 0


def cmd_usage(args: argparse.Namespace) -> int:
    from . import usage

    target = _target(args)
    report = (usage.all_usage if args.all else usage.own_usage)(target, args.from_date, args.to_date)
    print(json.dumps(report, indent=2) if args.json else "\n".join(usage.describe(report)))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    job = jobs.cancel(_target(args), args.job_id)
    cancellation = job.cancellation
    if args.json:
        answer = {"job_id": job.job_id, "status": job.status}
        if not cancellation.already:
            answer["cancelled_at_stage"] = cancellation.cancelled_at_stage
            answer["video_render_may_run"] = cancellation.video_render_may_run
            answer["note"] = cancellation.note
        print(json.dumps(answer))
    elif not cancellation.already:
        print(f"job {args.job_id}: cancelled (at {cancellation.cancelled_at_stage})")
        print(f"  {cancellation.note}")
    else:
        print(f"job {args.job_id}: was already cancelled")
    return 0


def cmd_webhooks(args: argparse.Namespace) -> int:
    from . import webhooks

    if args.webhooks_command == "secret":
        view = webhooks.unowned(_target(args)) if args.unowned else webhooks.secret_view(_target(args))
        print(json.dumps(view) if args.json else view["secret"])
        return 0
    if args.webhooks_command == "rotate":
        print(webhooks.rotate(_target(args), grace_hours=args.grace_hours, end_grace=args.end_grace,
                              force=args.force))  # fmt: skip
        return 0
    whsec = webhooks.resolve_secret(lambda: _target(args), args.secret)
    return webhooks.listen(whsec, args.port, count=args.count, timeout=args.timeout, as_json=args.json,
                           fail_first=args.fail_first)  # fmt: skip


def cmd_batch(args: argparse.Namespace) -> int:
    target = _target(args)
    if args.what[0] == "status":
        if len(args.what) != 2:
            raise UsageError("usage: omnireel batch status BATCH_ID")
        batch = batches.get_batch(target, args.what[1])
        print(json.dumps(batch.raw, indent=2) if args.json else "\n".join(batches.describe(batch)))
        return 0
    if len(args.what) != 1:
        raise UsageError("usage: omnireel batch FILE.jsonl [--wait]  |  omnireel batch status BATCH_ID")
    started = batches.submit_file(target, Path(args.what[0]), via_api=args.api, key=args.key)
    if not args.wait:
        print(json.dumps(started) if args.json else started["batch_id"])
        return 0
    print(f"batch {started['batch_id']} ({started['source']})", file=sys.stderr)
    batch = batches.wait(target, started["batch_id"], args.timeout)
    print(json.dumps(batch.raw, indent=2) if args.json else "\n".join(batches.describe(batch)))
    batches.raise_if_failed(batch)
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    from . import events

    return events.events(_target(args), args.follow, args.json, args.timeout, job_id=args.job)


def _video_facts(path: Path) -> str:
    from .mp4_facts import read_video_facts

    try:
        return str(read_video_facts(path))
    except Exception as exc:  # noqa: BLE001 - a description only
        return f"(not an MP4 with a video track: {exc})"


def cmd_demo(args: argparse.Namespace) -> int:
    started = time.monotonic()
    if not args.stack:
        local_stack.up()
    target = _target(args)
    from . import events

    tap = events.EventTap(target)
    try:
        accepted = jobs.submit(target, _request(args, args.prompt))
        job_id = accepted.job_id
        print(f"submitted job {job_id}: {args.prompt!r}", file=sys.stderr)
        job = jobs.wait(target, accepted, args.timeout)
        event = events.wait_for_event(tap.sqs, tap.url, job_id, timeout=20)
    finally:
        tap.close()
    directory = args.out / job_id
    saved = jobs.download(target, job, directory)
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
        print(f"the local stack keeps running: {invocation.hint('local down')} stops it", file=sys.stderr)
    jobs.raise_if_failed(job)
    if "video" in saved:
        print(f"video: {saved['video']}")
    return 0


def cmd_tts(args: argparse.Namespace) -> int:
    if args.open:
        relay = tts.resolve(args.stack, args.region, args.url, args.token)
        page, opened = tts.open_page(relay)
        if opened:
            print(f"opened the relay page {page} (token passed in the URL fragment, never sent to the server)")
        else:
            print(f"no browser could be started; open this URL yourself (it contains the token): {page}#token="
                  f"{tts.quote(relay.token, safe='')}")  # fmt: skip
        return 0
    if args.text is None:
        raise UsageError("say something: omnireel tts TEXT (or --open for the relay's web page)")
    relay = tts.resolve(args.stack, args.region, args.url, args.token)
    speech = tts.speak(relay, args.text, args.out, voice=args.voice, language=args.language, timeout=args.timeout)
    print(tts.as_json(speech) if args.json else "\n".join(speech.lines()))
    return 0


def cmd_tts_proxy(args: argparse.Namespace) -> int:
    from . import tts_proxy

    tts_proxy.parse_listen(args.listen)  # refuse a non-loopback address before looking anything up
    return tts_proxy.run(tts.resolve(args.stack, args.region, args.url, args.token), args.listen)


def cmd_ui(args: argparse.Namespace) -> int:
    from . import ui

    ui.parse_listen(args.listen)  # refuse a non-loopback address before looking anything up
    return ui.serve(_target(args), args.listen)


def cmd_smoke(args: argparse.Namespace) -> int:
    try:
        width, height = (int(x) for x in args.image_size.lower().split("x"))
    except ValueError as exc:
        raise UsageError(f"--image-size must look like 1024x1024, got {args.image_size!r}") from exc
    started = time.monotonic()
    target = _target(args)
    print(smoke.header(target, args.out), flush=True)
    image_ok = True
    if getattr(args, "stack", None):  # the pinned DLC tag still exists in the stack's region (issue 16)
        image = preflight.deployed_image_report(target.session(), args.stack)
        print("\n".join(image.render().splitlines()[:-1]), flush=True)
        image_ok = image.ok
    checks = smoke.run(
        target,
        args.out,
        image_size=f"{width}x{height}",
        video_timeout=args.timeout,
        tts_timeout=args.tts_timeout,
        prompt=args.prompt,
        skip=tuple(dict.fromkeys(args.skip)),
    )
    ok, verdict = smoke.summary(checks, time.monotonic() - started)
    print(verdict, flush=True)
    return 0 if ok and image_ok else EXIT_JOB_FAILED


def cmd_invoke(args: argparse.Namespace) -> int:
    overrides = invoke.parse_sets(args.set)
    return invoke.invoke(_target(args), args.function, args.event, args.job, overrides, args.json)


def cmd_logs(args: argparse.Namespace) -> int:
    from . import logs

    logs.show(target.Target.local_stack(), args.source, args.job, args.follow, args.timeout, args.tail)
    return 0


def cmd_aws(args: argparse.Namespace) -> int:
    from . import aws_cli

    if not args.aws_args:
        raise UsageError("usage: omnireel aws SERVICE COMMAND [ARGS...], e.g. omnireel aws s3 ls")
    return aws_cli.run(args.aws_args)


def cmd_preflight(args: argparse.Namespace) -> int:
    try:
        stack, overrides = preflight.profile(args.config_env)
        overrides.update(dict(item.split("=", 1) for item in args.parameter))
    except ValueError as exc:
        raise UsageError(f"{exc} (--parameter takes NAME=VALUE)") from exc
    stack = args.stack_name or stack
    clients, account = None, None
    if not args.offline:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        session = boto3.session.Session(region_name=args.region)
        try:
            account = session.client("sts").get_caller_identity()["Account"]
        except (BotoCoreError, ClientError) as exc:
            raise UsageError(
                f"no AWS credentials for {args.region} ({exc}); use --offline for template checks"
            ) from exc
        clients = session.client
    report = preflight.run(stack, args.region, overrides, clients=clients, account=account)
    print(report.render(), flush=True)
    return 0 if report.ok else EXIT_USAGE


COMMANDS = {
    "local": cmd_local,
    "submit": cmd_submit,
    "drop": cmd_drop,
    "status": cmd_status,
    "events": cmd_events,
    "jobs": cmd_jobs,
    "usage": cmd_usage,
    "webhooks": cmd_webhooks,
    "cancel": cmd_cancel,
    "batch": cmd_batch,
    "demo": cmd_demo,
    "tts": cmd_tts,
    "tts-proxy": cmd_tts_proxy,
    "ui": cmd_ui,
    "smoke": cmd_smoke,
    "invoke": cmd_invoke,
    "logs": cmd_logs,
    "aws": cmd_aws,
    "preflight": cmd_preflight,
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    parser.argv = argv
    try:
        if argv[:1] == ["aws"] and argv[1:2] not in (["-h"], ["--help"]):
            # Everything after `aws` is the AWS CLI's, options too (`omnireel aws --version`, `... --query x`).
            args = argparse.Namespace(command="aws", aws_args=argv[1:])
        else:
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
