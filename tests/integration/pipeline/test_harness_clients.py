"""The harness keeps the handlers' AWS clients from one deployment to the next in a process (creating them again was a
large share of each test's CPU), but only while they still point at moto: a client another test pointed elsewhere and
left in the cache is dropped, so no deployment ever talks to a stale endpoint."""

from __future__ import annotations

import pytest

from omnireel.aws import clients
from tests.integration.pipeline.harness import REGION, Pipeline


def test_a_second_deployment_keeps_the_handlers_clients(make_pipeline) -> None:
    make_pipeline()
    first = clients.client("dynamodb")
    Pipeline(suffix="again").deploy()
    assert clients.client("dynamodb") is first


@pytest.mark.parametrize(
    ("variable", "value"),
    [("AWS_DEFAULT_REGION", "eu-west-1"), ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
     ("AWS_ENDPOINT_URL_SQS", "http://127.0.0.1:9")],
)  # fmt: skip
def test_clients_left_pointing_elsewhere_are_dropped(make_pipeline, monkeypatch, variable: str, value: str) -> None:
    clients.client.cache_clear()
    with monkeypatch.context() as elsewhere:
        elsewhere.setenv(variable, value)
        stale = clients.client("sqs")  # created by "another test" and left in the cache
    pipeline = make_pipeline()
    fresh = clients.client("sqs")
    assert fresh is not stale
    assert fresh.meta.region_name == REGION and fresh.meta.endpoint_url == f"https://sqs.{REGION}.amazonaws.com"
    assert pipeline.api("GET", "/jobs/does-not-exist")["statusCode"] == 404
