"""The typed settings every function reads at cold start (``omnireel.runtime.settings``)."""

from __future__ import annotations

import pytest

from omnireel.runtime.settings import (
    ApiSettings,
    DeadlineSettings,
    ImageSettings,
    InboxSettings,
    PublishSettings,
    ResultSettings,
    VideoSettings,
)

BASE = {"JOBS_TABLE": "jobs", "ARTIFACTS_BUCKET": "artifacts", "JOB_EVENTS_TOPIC_ARN": "arn:topic"}


def test_fields_are_read_from_their_upper_case_variables_and_typed() -> None:
    env = {**BASE, "STATE_MACHINE_ARN": "arn:sm", "JOB_TTL_DAYS": "7", "PRESIGN_SECONDS": "600", "PATH": "/bin"}
    settings = ApiSettings.from_env(env)
    assert (settings.jobs_table, settings.artifacts_bucket) == ("jobs", "artifacts")
    assert settings.state_machine_arn == "arn:sm"
    assert (settings.job_ttl_days, settings.presign_seconds, settings.default_video_steps) == (7, 600, 30)


def test_defaults_apply_when_a_variable_is_absent() -> None:
    image = ImageSettings.from_env({**BASE, "IMAGE_ENDPOINT_NAME": "img", "VIDEO_ENDPOINT_NAME": "vid"})
    assert image.image_model_id == "black-forest-labs/FLUX.2-klein-4B" and image.job_ttl_days == 30
    assert image.video_model_id == "Wan-AI/Wan2.1-VACE-1.3B-diffusers"
    assert InboxSettings.from_env({**BASE, "STATE_MACHINE_ARN": "a", "JOB_EVENTS_TOPIC_ARN": "t"}).event_bus_name == (
        "default"
    )


def test_a_missing_variable_fails_the_cold_start_naming_it() -> None:
    with pytest.raises(RuntimeError, match=r"VideoSettings: VIDEO_ENDPOINT_NAME$"):
        VideoSettings.from_env(BASE)
    with pytest.raises(RuntimeError, match=r"ImageSettings: IMAGE_ENDPOINT_NAME$"):
        ImageSettings.from_env(BASE)
    # GenerateImage only stages the video request: InvokeVideo queues it (its function has the video endpoint).
    assert "video_endpoint_name" not in ImageSettings.__struct_fields__
    with pytest.raises(RuntimeError, match=r"JOBS_TABLE, ARTIFACTS_BUCKET|ARTIFACTS_BUCKET, JOBS_TABLE"):
        ResultSettings.from_env({"JOB_EVENTS_TOPIC_ARN": "arn:topic"})


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("PRESIGN_SECONDS", "59"),  # below S3's useful minimum
        ("PRESIGN_SECONDS", "43201"),  # a role session lasts at most 12 h
        ("JOB_TTL_DAYS", "0"),
        ("JOB_TTL_DAYS", "seven"),
        ("VIDEO_INVOCATION_TIMEOUT_SECONDS", "3601"),  # SageMaker's limit
        ("VIDEO_REQUEST_TTL_SECONDS", "59"),
    ],
)
def test_values_outside_their_bounds_fail_naming_the_variable(variable: str, value: str) -> None:
    with pytest.raises(RuntimeError, match=variable):
        VideoSettings.from_env({**BASE, "VIDEO_ENDPOINT_NAME": "v", variable: value})


def test_the_deadline_has_no_default_and_must_be_positive() -> None:
    env = {**BASE, "JOB_EVENTS_TOPIC_ARN": "t", "STATE_MACHINE_ARN": "s"}
    with pytest.raises(RuntimeError, match="JOB_DEADLINE_SECONDS"):
        DeadlineSettings.from_env(env)
    with pytest.raises(RuntimeError, match="JOB_DEADLINE_SECONDS"):
        DeadlineSettings.from_env({**env, "JOB_DEADLINE_SECONDS": "0"})
    assert DeadlineSettings.from_env({**env, "JOB_DEADLINE_SECONDS": "7200"}).job_deadline_seconds == 7200


def test_settings_are_frozen_and_ignore_other_variables() -> None:
    settings = PublishSettings.from_env({**BASE, "JOB_EVENTS_TOPIC_ARN": "t", "UNRELATED": "x"})
    assert not hasattr(settings, "unrelated")
    with pytest.raises(AttributeError):
        settings.jobs_table = "other"  # type: ignore[misc]


def test_from_env_reads_the_process_environment_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**BASE, "IMAGE_ENDPOINT_NAME": "from-os", "VIDEO_ENDPOINT_NAME": "v"}.items():
        monkeypatch.setenv(name, value)
    assert ImageSettings.from_env().image_endpoint_name == "from-os"


def test_a_boolean_reads_every_spelling_pydantic_read_and_nothing_else() -> None:
    env = {**BASE, "STATE_MACHINE_ARN": "s"}
    for value, expected in [("true", True), ("FALSE", False), ("yes", True), ("off", False), ("1", True), ("n", False)]:
        assert (
            ApiSettings.from_env({**env, "WEBHOOK_ALLOW_LOOPBACK_HTTP": value}).webhook_allow_loopback_http is expected
        )
    with pytest.raises(RuntimeError, match=r"ApiSettings: WEBHOOK_ALLOW_LOOPBACK_HTTP$"):
        ApiSettings.from_env({**env, "WEBHOOK_ALLOW_LOOPBACK_HTTP": "maybe"})


def test_every_bad_variable_is_named_not_only_the_first() -> None:
    with pytest.raises(RuntimeError, match=r"ApiSettings: JOB_TTL_DAYS, STATE_MACHINE_ARN, DEFAULT_VIDEO_STEPS$"):
        ApiSettings.from_env({**BASE, "JOB_TTL_DAYS": "0", "DEFAULT_VIDEO_STEPS": "x"})
