"""Write the SAM-transformed template.yaml as CloudFormation JSON, for checkov.

checkov's CloudFormation checks see only what CloudFormation will create, so the template is expanded with the same
SAM transform CloudFormation runs (aws-sam-translator, as the local stack does). SAM copies each serverless resource's
``Metadata`` (and so its ``checkov: skip`` waivers) onto the resource it generates.

Usage: python scripts/checkov_template.py [OUT.json]   (default .aws-sam/checkov/template.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omnireel_local.provision import transform


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".aws-sam/checkov/template.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    _, cfn, _ = transform("omnireel-checkov", "us-east-1")
    out.write_text(json.dumps(cfn, indent=1))
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
