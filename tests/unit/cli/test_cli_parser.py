"""The CLI's argument surface: every job field has a flag, every argument has help, typos get a suggestion."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from omnireel.jobs.inbox import PREFIX, parse_inbox_file
from omnireel.jobs.request import ImageOptions, JobRequest, VideoOptions, parse_job_request
from omnireel_cli import job_options, jobs
from omnireel_cli.errors import UsageError
from omnireel_cli.main import _all_parsers, build_parser, main


def _model_paths() -> set[tuple[str, ...]]:
    paths = {(name,) for name in JobRequest.__struct_fields__ if name not in {"prompt", "image", "video"}}
    paths |= {("image", name) for name in ImageOptions.__struct_fields__}
    paths |= {("video", name) for name in VideoOptions.__struct_fields__}
    return paths


def test_every_job_request_field_has_a_flag() -> None:
    assert _model_paths() == {field.path for field in job_options.JOB_FIELDS}


def test_every_argument_of_every_command_has_help() -> None:
    missing = []
    for parser in _all_parsers(build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                missing += [f"{parser.prog} {a.dest}" for a in action._choices_actions if not a.help]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{parser.prog} {action.dest}")
    assert missing == []


def test_flags_build_the_request_body() -> None:
    args = build_parser().parse_args(
        ["submit", "a fox", "--negative-prompt", "blurry", "--guidance-scale", "7.5", "--image-size", "512x512",
         "--image-steps", "2", "--fps", "12", "--width", "320", "--height", "256", "--frames", "9", "--steps", "4",
         "--seed", "7", "--video-prompt", "pan left", "--video-negative-prompt", "shake"]
    )  # fmt: skip
    body = job_options.request_from_args(args, args.prompt)
    assert body == {
        "prompt": "a fox",
        "negative_prompt": "blurry",
        "guidance_scale": 7.5,
        "seed": 7,
        "image": {"size": "512x512", "num_inference_steps": 2},
        "video": {
            "width": 320,
            "height": 256,
            "num_frames": 9,
            "fps": 12,
            "num_inference_steps": 4,
            "prompt": "pan left",
            "negative_prompt": "shake",
        },
    }
    parse_job_request(body)  # the API's own parser accepts it as is
    assert job_options.request_from_args(build_parser().parse_args(["submit", "p"]), "p") == {"prompt": "p"}


def test_size_and_width_conflict() -> None:
    args = build_parser().parse_args(["submit", "p", "--size", "480x320", "--width", "320"])
    with pytest.raises(UsageError, match="either --size or --width"):
        job_options.request_from_args(args, "p")


def test_mistyped_command_gets_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sumbit", "p"]) == 2
    assert "did you mean: submit?" in capsys.readouterr().err
    assert main(["submit", "p", "--negativ-prompt", "x"]) == 2
    assert "did you mean: --negative-prompt" in capsys.readouterr().err
    assert main(["local", "stat"]) == 2
    assert "did you mean: status?" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("omnireel ")


def test_drop_checks_match_the_inbox(tmp_path: Path) -> None:
    assert jobs.INBOX_PREFIX == PREFIX
    for suffix in jobs.INBOX_SUFFIXES:
        parse_inbox_file(f"{PREFIX}x{suffix}", b'{"prompt": "p"}' if suffix == ".json" else b"p")
    wrong = tmp_path / "prompt.md"
    wrong.write_text("a prompt")
    with pytest.raises(UsageError, match=r"unsupported file type '\.md'"):
        jobs.check_drop(wrong, None)
    with pytest.raises(UsageError, match="under prompts/"):
        jobs.check_drop(wrong, "elsewhere/prompt.txt")
    assert jobs.check_drop(wrong, "prompts/prompt.txt") == "prompts/prompt.txt"


def test_a_default_the_help_states_is_the_default_the_parser_uses() -> None:
    """Where an option's help says "(default N)" and the parser has a default of its own, they agree (omnireel demo
    said "default 600" for --timeout while it waited 180 s). Job fields' help states the API's defaults: their parser
    default is None (the API decides), so they are not compared."""
    import re

    wrong = []
    for parser in _all_parsers(build_parser()):
        for action in parser._actions:
            if action.default in (None, argparse.SUPPRESS) or not action.help or isinstance(action.default, bool):
                continue
            stated = re.search(
                r"\(default (-?\d+(?:\.\d+)?)(?=[\s;,:)])", action.help % {"default": action.default, "prog": ""}
            )
            if stated and float(stated.group(1)) != float(action.default):
                wrong.append(f"{parser.prog} {action.option_strings}: help {stated.group(1)}, default {action.default}")
    assert not wrong, wrong
