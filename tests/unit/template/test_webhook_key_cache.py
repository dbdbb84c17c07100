"""Issue 33 item 9 in the template: every function that reads the webhook master key keeps it for the same time, so
the API's ``GET /webhooks/secret`` derives the same rotation phases as the delivery function signs with
(``omnireel.webhooks.secrets``: a rotation takes effect after the reader's key cache + ``PICKUP_MARGIN``).

Derived from the template: the readers are the functions whose environment names the master key's secret."""

from __future__ import annotations

from typing import Any

from omnireel.runtime.settings import ApiSettings, WebhookSettings
from omnireel.webhooks.secrets import PICKUP_MARGIN
from omnireel_template import load_template

_FIELDS, _DEFAULTS = ApiSettings.__struct_fields__, ApiSettings.__struct_defaults__  # defaults: the last fields'


def _default(name: str) -> Any:
    return _DEFAULTS[_FIELDS.index(name) - (len(_FIELDS) - len(_DEFAULTS))]


DEFAULT = _default("webhook_key_cache_seconds")


def _variables(template: dict[str, Any], resource: dict[str, Any]) -> dict[str, Any]:
    shared = ((template.get("Globals") or {}).get("Function") or {}).get("Environment", {}).get("Variables", {})
    own = (resource["Properties"].get("Environment") or {}).get("Variables", {})
    return {**shared, **own}


def test_every_reader_of_the_webhook_master_key_caches_it_for_the_same_time() -> None:
    template = load_template()
    functions = {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"}
    readers = {
        n: _variables(template, r) for n, r in functions.items() if "WEBHOOK_SECRET_ARN" in _variables(template, r)
    }
    assert DEFAULT == 300.0
    for name in ("webhook_key_cache_seconds", "webhook_pickup_margin_seconds"):  # the delivery function's defaults too
        assert WebhookSettings.__struct_defaults__[
            WebhookSettings.__struct_fields__.index(name)
            - (len(WebhookSettings.__struct_fields__) - len(WebhookSettings.__struct_defaults__))
        ] == _default(name)
    assert {"ApiFunction", "WebhookDeliveryFunction"} <= set(readers), sorted(readers)
    caches = {n: float(v.get("WEBHOOK_KEY_CACHE_SECONDS", DEFAULT)) for n, v in readers.items()}
    assert len(set(caches.values())) == 1, f"the master key's readers cache it differently: {caches}"
    margin = _default("webhook_pickup_margin_seconds")
    assert margin == PICKUP_MARGIN.total_seconds()
    margins = {n: float(v.get("WEBHOOK_PICKUP_MARGIN_SECONDS", margin)) for n, v in readers.items()}
    assert len(set(margins.values())) == 1, f"the master key's readers wait different margins: {margins}"
