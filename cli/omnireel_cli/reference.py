"""docs/cli.md, the reference of every ``omnireel`` command, generated from the CLI's own parser (issue 36 item 5).

``render()`` walks ``main.build_parser()``: every command and subcommand in the order the parser adds them, with its
usage, description and a table of its arguments (option strings, metavar, default, choices, help). What a parser
cannot say is hand-written here, next to the code it describes: ``INTRO`` (what every command shares) and ``NOTES``
(facts about one command that its help does not carry). A note for a command the parser does not have is an error, so
the notes cannot outlive their command.

    .venv/bin/python -m omnireel_cli.reference docs/cli.md      # or: make docs (without a path: to stdout)

``tests/unit/docs/test_cli_reference.py`` fails when docs/cli.md differs from what this renders now: change the parser
(or the notes) and run ``make docs``.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

USAGE_WIDTH = 100  # argparse wraps the usage at this width (fixed: the terminal's width must not change the page)
TEXT_WIDTH = 118  # prose is wrapped as the hand-written pages are

INTRO = """\
`make demo` installs the `omnireel` command into `.venv/bin`. Every command works against the local stack (default) or
a deployed stack (`--stack NAME --region R`, which reads the stack's CloudFormation outputs). API calls go through the
Python client ([client.md](client.md)) and are signed with SigV4 either way: locally with the access key of the local
developer IAM user that `omnireel local up` creates (in `.omnireel/state.json`), because the local front door checks
signatures like API Gateway ([local-stack.md](local-stack.md)). `--wait` shows live progress on stderr: on a terminal
one line redrawn in place (a job's stages with their durations; a batch's counts with a bar and a rate), through a
pipe one plain line per change.

Exit codes: 0 ok, 1 job failed, 2 usage or request rejected, 3 stack not running / infrastructure error.
`omnireel --version`; every command and argument has `--help`, and a mistyped command or option gets a suggestion
(`omnireel sumbit` → did you mean: submit?); an unknown option shows the usage of the subcommand it was given to
(`omnireel local up --paramter` → `usage: omnireel local up ...`, did you mean: --parameter?). A job flag out of bounds
is refused before any call, naming every bound the API applies (`--width 100`: at least 128, at most 1280 and a
multiple of 16). `local up --parameter` refuses a name the template does not declare, as CloudFormation does
(`Parameters: [X] do not exist in the template`, with the closest real name). `local env` prints only valid shell names
whatever a model is called (a model created outside the template, `vllm-omni-media-image-model-<ts>`, becomes
`OMNIREEL_EMULATOR_VLLM_OMNI_MEDIA_IMAGE_MODEL_<ts>_URL`), so `eval "$(omnireel local env)"` works under `set -e`.
Hints name the command as you can type it here (`.venv/bin/omnireel local down` after `make demo`, where `omnireel` is
not on PATH)."""

# Facts about one command that its parser's help and description do not carry (key: the command's words).
NOTES: dict[tuple[str, ...], str] = {
    ("local", "up"): (
        "Returns when the stack is ready; it listens on fixed loopback ports ([local-stack.md](local-stack.md#ports))."
    ),
    ("local", "down"): ("No process of the stack is left."),
    ("local", "env"): (
        "Shell-quoted `export KEY=VALUE` lines for `eval`: `AWS_ENDPOINT_URL`, `AWS_REGION`, the developer "
        "identity's key, `OMNIREEL_API_URL`, `OMNIREEL_RELAY_URL`, `OMNIREEL_RELAY_TOKEN`, "
        "`OMNIREEL_WEBHOOK_SECRET` (the developer identity's, as of `local up`), bucket / topic names, emulator "
        "URLs. It also unsets `AWS_PROFILE` and `AWS_SESSION_TOKEN`, so real AWS credentials cannot mix in."
    ),
    ("submit",): (
        "`POST /jobs` through the HTTP API, with a flag for every field of the job request (unset flags take the "
        "API's defaults), and an `Idempotency-Key` on every submit (a new `cli-<uuid>` unless given; printed on "
        "stderr and in `--json`), so the CLI's own retries after a 5xx or a lost answer never make a second job. "
        "The fields, their defaults and bounds: [api.md](api.md) and `docs/openapi.yaml`."
    ),
    ("drop",): (
        "A key outside `prompts/` is refused before anything is uploaded, like another extension. "
        "[inbox.md](inbox.md): what the inbox does with the file."
    ),
    ("status",): ("Status, stage timings, artifact URIs, webhook deliveries."),
    ("webhooks", "listen"): ("`--json` also shows how many signatures came and the `Host` header."),
    ("webhooks", "secret"): (
        "`omnireel local env` prints the developer identity's secret, as of `local up`, as "
        "`OMNIREEL_WEBHOOK_SECRET`. [webhooks.md](webhooks.md#one-secret-per-caller)."
    ),
    ("webhooks", "rotate"): (
        "The previous key keeps signing for `--grace-hours` (default 24; `0` stops it at once); `--end-grace` ends "
        "a running grace period ([webhooks.md](webhooks.md#rotation), [runbook](operations/webhook-keys.md))."
    ),
    ("batch",): (
        "A JSONL file of job requests as one batch: dropped into the inbox; `--api` sends it as `POST /batches`, or"
        " through `POST /batches/uploads` when it is over Lambda's 6 MB. `--wait` follows the counts and exits 1 if"
        " any job failed or was cancelled ([batches.md](batches.md))."
    ),
    ("events",): (
        "Locally a replayable log: every event since `local up`, again on every call (kept in "
        "`.omnireel/events.jsonl`); `--follow` then says it is waiting and prints new ones."
    ),
    ("demo",): (
        "Leaves `out/<job id>/image.png`, `video.mp4` and `event.json` (the `job.succeeded` a consumer receives), "
        "and prints per-stage timings; the stack keeps running."
    ),
    ("tts",): ("Prints the time to first audio. [voice.md](voice.md)."),
    ("ui",): ("[ui.md](ui.md): what the page shows and how it keeps other sites out."),
    ("smoke",): (
        "Writes `out/validation-output.{png,mp4,wav}`, and a `deploy` line with the deploy facts one call can check"
        " ([first-deploy checklist](operations/first-deploy.md))."
    ),
    ("invoke",): (
        "Locally or with `--stack`: the events' placeholders are filled from a real job, the latest by default."
    ),
    ("logs",): (
        "Lambda lines always carry their job: the workers stamp time, request id and job id on every line. `--job` "
        "keeps one job's lines across all sources."
    ),
    ("aws",): (
        "Like LocalStack's `awslocal`: `omnireel aws s3 ls`. The AWS CLI is not in `.venv` (it pins its own "
        "botocore): `make aws-cli` installs it into `.venv-aws` (else `aws` on PATH is used)."
    ),
    ("preflight",): (
        "Run by `make deploy ENV=dev REGION=R`. The stack name limit: `<stack>-inbox-<account>-<region>` ≤ 63 "
        "characters, 34 in us-east-1; the DLC tag is checked with `ecr batch-get-image` ([operations: "
        "deploy](operations/deploy.md))."
    ),
}


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def commands(
    parser: argparse.ArgumentParser, words: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    """Every command that runs something (a parser without subcommands): its words, its one-line help, its parser."""
    sub = _subparsers(parser)
    if sub is None:
        return
    helps = {choice.dest: choice.help or "" for choice in sub._choices_actions}
    for name, child in sub.choices.items():
        path = (*words, name)
        if _subparsers(child) is None:
            yield path, helps.get(name, ""), child
        else:
            yield from commands(child, path)


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = argparse.HelpFormatter(prog=parser.prog, width=USAGE_WIDTH)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)
    return formatter.format_help().strip()


def _prose(text: str) -> str:
    return textwrap.fill(" ".join(text.split()), TEXT_WIDTH, break_long_words=False, break_on_hyphens=False)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _argument(action: argparse.Action) -> str:
    if not action.option_strings:
        return _cell(f"`{action.metavar or action.dest}`")
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    return ", ".join(f"`{o} {metavar}`" if takes_value else f"`{o}`" for o in action.option_strings)


def _default(action: argparse.Action) -> str:
    value = action.default
    if value in (None, False, [], argparse.SUPPRESS) or action.nargs == 0:
        return ""
    return f"`{value}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    text = parser._get_formatter()._expand_help(action) if action.help else ""
    if action.choices and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(f'`{c}`' for c in action.choices)})"
    return _cell(text)


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    rows = [
        f"| {_argument(a)} | {_default(a)} | {_help(parser, a)} |"
        for a in parser._actions
        if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
    ]
    return ["| argument | default | what |", "|---|---|---|", *rows] if rows else []


def render(parser: argparse.ArgumentParser | None = None, notes: dict[tuple[str, ...], str] | None = None) -> str:
    """docs/cli.md as it must read now: the intro, a table of the commands, then one section per command."""
    notes = NOTES if notes is None else notes
    if parser is None:
        from .main import build_parser

        parser = build_parser()
    found = list(commands(parser))
    unknown = sorted(" ".join(words) for words in notes if words not in {path for path, _, _ in found})
    if unknown:
        raise ValueError(f"NOTES for commands the parser does not have: {unknown}")
    out = [
        "# The `omnireel` command",
        "",
        "<!-- Generated from the CLI's parser by `make docs` (cli/omnireel_cli/reference.py): change the parser,",
        "or INTRO / NOTES there, then run `make docs`. tests/unit/docs/test_cli_reference.py fails when this file",
        "is stale. -->",
        "",
        INTRO,
        "",
        "## Commands",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    for path, help_, _ in found:
        out.append(f"| [`omnireel {' '.join(path)}`](#omnireel-{'-'.join(path)}) | {_cell(help_)} |")
    out += ["", "The global options: `--version` (print the version), `--help`."]
    for path, help_, command in found:
        out += ["", f"## `omnireel {' '.join(path)}`", ""]
        if help_:
            out += [help_[0].upper() + help_[1:] + ("" if help_.endswith(".") else "."), ""]
        out += ["```", _usage(command), "```"]
        if command.description:
            out += ["", _prose(command.description)]
        if path in notes:
            out += ["", _prose(notes[path])]
        table = _arguments(command)
        if table:
            out += ["", *table]
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Write the page to the path given (whole or not at all), or to stdout without one."""
    text = render()
    if not argv:
        sys.stdout.write(text)
        return 0
    target = Path(argv[0])
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(text)
    partial.replace(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
