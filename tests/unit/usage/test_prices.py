"""Issue 34 item 8: one price table. Every SageMaker instance price the docs state (docs/operations/cost.md) is the
table's (omnireel.usage.prices), and the capacity model computes with the table, so a price changed in one place is
changed everywhere; every instance type the template offers by default has a price."""

from __future__ import annotations

import re

from omnireel.usage.prices import ON_DEMAND_USD_PER_HOUR, PRICES_AS_OF, PRICES_SOURCE
from omnireel_template import ROOT, load_template


def test_the_docs_cost_table_states_the_price_tables_figures() -> None:
    text = (ROOT / "docs" / "operations" / "cost.md").read_text()
    section = text.split("# Cost", 1)[1].split("\n## ", 1)[0]
    stated = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| (ml\.[\w.]+)[^|]*\| ~\$([0-9.]+) \|", section,
                                                                    re.M)}  # fmt: skip
    assert stated and stated == ON_DEMAND_USD_PER_HOUR


def test_the_capacity_model_reads_the_table() -> None:
    import sys

    sys.path.insert(0, str(ROOT))
    from bench import capacity

    assert ON_DEMAND_USD_PER_HOUR["ml.g6.xlarge"] == capacity.PRICE_IMAGE_PER_H
    assert ON_DEMAND_USD_PER_HOUR["ml.g6e.xlarge"] == capacity.PRICE_VIDEO_PER_H
    assert not re.search(r"PRICE_\w+ = [0-9]", (ROOT / "bench" / "capacity.py").read_text())


def test_every_default_instance_type_of_the_template_is_priced_and_the_table_says_when_and_where() -> None:
    parameters = load_template()["Parameters"]
    defaults = set()
    for name in ("ImageInstanceTypes", "TtsInstanceTypes", "VideoInstanceType"):
        default = parameters[name]["Default"]
        defaults |= set(default if isinstance(default, list) else str(default).split(","))
    assert defaults <= set(ON_DEMAND_USD_PER_HOUR), defaults - set(ON_DEMAND_USD_PER_HOUR)
    assert PRICES_AS_OF in PRICES_SOURCE and "us-east-1" in PRICES_SOURCE and "check" in PRICES_SOURCE
