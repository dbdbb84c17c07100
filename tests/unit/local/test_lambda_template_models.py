"""The Lambda worker template parses botocore's service models once (omnireel_local.lambda_zygote.share_models): a
worker's clients then read no model file, and the services it warms are every service the domain package makes a
client of (derived from the source, so a new one cannot slip past)."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

from omnireel_local import lambda_zygote

ROOT = Path(__file__).resolve().parents[3]


def test_the_template_warms_every_service_the_domain_package_uses() -> None:
    used = set()
    for path in (ROOT / "layers" / "omnireel" / "omnireel").rglob("*.py"):
        used |= set(re.findall(r"\bclient\(\"([a-z0-9-]+)\"", path.read_text()))
    assert used, "no client(...) call found: the rule no longer sees the domain package's clients"
    assert used <= set(lambda_zygote.MODEL_SERVICES), sorted(used - set(lambda_zygote.MODEL_SERVICES))


def test_a_worker_s_clients_read_no_model_file_and_another_data_path_gets_its_own_loader(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import json, sys
        import botocore.loaders, botocore.session
        from omnireel_local import lambda_zygote

        warm = lambda_zygote.share_models(("dynamodb", "s3"))
        read = []
        original = botocore.loaders.JSONFileLoader.load_file
        botocore.loaders.JSONFileLoader.load_file = lambda self, path: (read.append(path), original(self, path))[1]
        session = botocore.session.get_session()  # a worker's session: its own region and credentials
        for service in ("dynamodb", "s3"):
            client = session.create_client(service, region_name="eu-west-1", endpoint_url="http://127.0.0.1:9",
                                           aws_access_key_id="a", aws_secret_access_key="b")
        same = session.get_component("data_loader") is warm
        region = client.meta.region_name
        other = botocore.session.get_session({"data_path": ("data_path", None, sys.argv[1], None)})
        other.set_config_variable("data_path", sys.argv[1])
        own = other.get_component("data_loader") is not warm
        print(json.dumps({"read": read, "same": same, "own": own, "region": region}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = done.stdout.strip().splitlines()[-1]
    assert result == '{"read": [], "same": true, "own": true, "region": "eu-west-1"}', result
