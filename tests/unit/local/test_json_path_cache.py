"""moto patch 34: each JSONPath string the Step Functions interpreter evaluates is parsed once per process; the
shared tree is only read, so evaluations of one path over different inputs keep their own results."""

from __future__ import annotations

import importlib
from typing import Any

import jsonpath_ng
import jsonpath_ng.ext
import pytest

from omnireel_local.patches.speed import JSON_PATH_USERS, patch_json_path_cache

PATHS = ("$.job.video_request.width", "$.items[0]", "$.detail")


def test_each_path_is_parsed_once_and_every_execution_gets_its_own_results(monkeypatch: pytest.MonkeyPatch) -> None:
    parses: list[str] = []
    for name, original in zip(JSON_PATH_USERS, (jsonpath_ng.ext.parse, jsonpath_ng.parse), strict=True):
        module = importlib.import_module(name)
        assert module.parse is original  # moto calls the library's parse by this name (the patch replaces it)

        def counted(path: str, _original: Any = original) -> Any:
            parses.append(path)
            return _original(path)

        monkeypatch.setattr(module, "parse", counted)
    patch_json_path_cache(monkeypatch.setattr)

    from moto.stepfunctions.parser.asl.utils.json_path import NoSuchJsonPathError, extract_json

    inputs = [{"job": {"video_request": {"width": 480 + n}}, "items": [n, n + 1], "detail": {"n": n}} for n in range(3)]
    for data in inputs:  # three executions with their own inputs
        assert extract_json(PATHS[0], data) == data["job"]["video_request"]["width"]
        assert extract_json(PATHS[1], data) == data["items"][0]
        assert extract_json(PATHS[2], data) == data["detail"]
    assert sorted(parses) == sorted(PATHS)  # once each, not once per evaluation

    with pytest.raises(NoSuchJsonPathError):  # a path that finds nothing answers as before
        extract_json("$.absent", inputs[0])
    for _ in range(2):  # a string that does not parse raises every time, nothing kept
        with pytest.raises(Exception, match=r"Parse error|Unexpected"):
            extract_json("$.[", inputs[0])
    assert parses.count("$.[") == 2

    result_path = importlib.import_module(JSON_PATH_USERS[1])
    assert result_path.parse("$.result") is result_path.parse("$.result")
