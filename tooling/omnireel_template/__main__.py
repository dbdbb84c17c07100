"""``python -m omnireel_template [DIR]``: write the state machine's ASL with the template's substitutions (for
asl-validator in ``make validate``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omnireel_template import render_for_lint

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".aws-sam/asl")
out.mkdir(parents=True, exist_ok=True)
target = out / "pipeline.asl.json"
target.write_text(json.dumps(render_for_lint(), indent=2))
print(target)
