"""The relay token's SecretString forms, parsed in one place for the relay and ``omnireel tts`` (issue 29 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from omnireel_relay.token_secret import TokenSourceError, token_from_secret_string

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("plain-token-value\n", "plain-token-value"),
        ('{"token": "in-an-object"}', "in-an-object"),
        ('"quoted"', "quoted"),
    ],
)
def test_the_forms_a_secret_may_take(value: str, token: str) -> None:
    assert token_from_secret_string(value, "s") == token


@pytest.mark.parametrize("value", ['{"other": 1}', "[1, 2]", '{"token": 7}'])
def test_anything_else_names_the_secret(value: str) -> None:
    with pytest.raises(TokenSourceError, match="secret arn:relay must be a string or a JSON object"):
        token_from_secret_string(value, "arn:relay")


def test_the_relay_and_the_cli_use_this_parser_and_no_copy_of_it() -> None:
    for path in (ROOT / "relay/omnireel_relay/auth.py", ROOT / "cli/omnireel_cli/tts.py"):
        text = path.read_text()
        assert "token_from_secret_string" in text and 'get("token")' not in text, path
