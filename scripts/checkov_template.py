"""Write the SAM-transformed template.yaml as CloudFormation JSON, for checkov.

checkov's CloudFormation checks see only what CloudFormation will create, so the template is expanded with the same
SAM transform CloudFormation runs (aws-sam-translator, as the local stack does). SAM copies each serverless resource's
``Metadata`` (and so its ``checkov: skip`` waivers) onto the resource it generates. The stack-wide waivers (template
``Metadata.StackWideCheckovWaivers``: one id, the resource types it holds for, one reason) are then copied onto every
resource of those types, so each reason is written once in the template.

Usage: python scripts/checkov_template.py [OUT.json]   (default .aws-sam/checkov/template.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from omnireel_template import load_template, placeholder_code, sam_transform

WAIVERS_KEY = "StackWideCheckovWaivers"


def stack_wide_waivers(sam: dict[str, Any]) -> list[dict[str, Any]]:
    return list(sam.get("Metadata", {}).get(WAIVERS_KEY, []))


def apply_stack_wide_waivers(cfn: dict[str, Any], waivers: list[dict[str, Any]]) -> int:
    """Add each waiver to the ``checkov.skip`` list of every resource of its types; returns how many were added."""
    added = 0
    for resource in cfn["Resources"].values():
        for waiver in waivers:
            if resource["Type"] in waiver["types"]:
                skip = resource.setdefault("Metadata", {}).setdefault("checkov", {}).setdefault("skip", [])
                skip.append({"id": waiver["id"], "comment": waiver["comment"]})
                added += 1
    return added


def checkov_template() -> dict[str, Any]:
    sam = load_template()
    cfn = sam_transform(placeholder_code(sam, "omnireel-checkov-code")[0], "omnireel-checkov", "us-east-1")
    apply_stack_wide_waivers(cfn, stack_wide_waivers(sam))
    return cfn


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".aws-sam/checkov/template.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(checkov_template(), indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
