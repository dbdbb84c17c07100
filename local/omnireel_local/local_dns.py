"""The local stack's resolver hook: host names under ``.test`` answered from a fault table, never by a DNS server.

Lambda functions resolve a webhook's host at every delivery (``omnireel.webhooks.target``). To show what a temporary
DNS failure does (issue 25: ``EAI_AGAIN``, SERVFAIL, a resolver timeout, NXDOMAIN), a test needs a host name that fails
to resolve N times and then resolves, without a packet leaving the machine. ``.test`` is reserved for testing (RFC
6761: never delegated), so no real name is shadowed.

``lambda_worker`` installs the hook in every local function process (``install``), before the handler is imported, when
the runner passes ``OMNIREEL_LOCAL_FAULTS_FILE`` (the stack's ``<home>/fault-injection.json``). It wraps
``socket.getaddrinfo``: any other name goes to the system resolver unchanged. This module is part of the local stack
only; nothing under ``functions/`` or the domain layer imports it, so it cannot be enabled on AWS. (The domain allows
``http://`` to a ``.test`` name only where ``WEBHOOK_ALLOW_LOOPBACK_HTTP`` is set - the local stack's setting - and only
when every address is loopback.)

The table is the ``dns`` key of the fault-injection config (written by tests as for every other fault hook)::

    {"dns": {"flaky.hooks.test": {"fail": 3, "error": "EAI_AGAIN", "address": "127.0.0.1",
                                  "functions": "WebhookDelivery", "delay_s": 0}}}

- ``fail``: how many lookups fail before the name resolves (-1: every lookup fails); counted across all function
  processes in ``<home>/local-dns.counts.json`` (reset whenever the config file changes);
- ``error``: ``EAI_AGAIN`` (default: what a SERVFAIL or a resolver timeout looks like to ``getaddrinfo``),
  ``EAI_FAIL`` or ``EAI_NONAME`` (NXDOMAIN);
- ``address``: the answer once the failures are used up, a loopback address only (default ``127.0.0.1``);
- ``functions``: only functions whose name contains this fail (others get the answer at once: the API's check at
  submit passes while the delivery function's lookups fail);
- ``delay_s``: every lookup of the name waits this long first (a slow resolver).

A ``.test`` name not in the table answers ``EAI_NONAME``, as a resolver would. Each failure is appended to
``<home>/fault-injection.log.jsonl`` (``kind: dns_failure``).
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

ENV = "OMNIREEL_LOCAL_FAULTS_FILE"
SUFFIX = ".test"
ERRORS = {
    "EAI_AGAIN": (socket.EAI_AGAIN, "Temporary failure in name resolution"),
    "EAI_FAIL": (socket.EAI_FAIL, "Non-recoverable failure in name resolution"),
    "EAI_NONAME": (socket.EAI_NONAME, "Name or service not known"),
}


class Table:
    """The ``dns`` table of one fault-injection config file, with failure counts shared between processes."""

    def __init__(self, config_file: Path, function_name: str):
        self.config_file = config_file
        self.counts_file = config_file.with_name("local-dns.counts.json")
        self.lock_file = config_file.with_name("local-dns.lock")
        self.log_file = config_file.with_name("fault-injection.log.jsonl")
        self.function_name = function_name

    def _config(self) -> tuple[dict[str, Any], int]:
        try:
            stat = self.config_file.stat()
            return json.loads(self.config_file.read_text()).get("dns") or {}, stat.st_mtime_ns
        except (OSError, ValueError, AttributeError):
            return {}, 0

    def lookup(self, host: str) -> str:
        """The address for ``host`` (a ``.test`` name), or ``socket.gaierror`` as the fault table says."""
        host = host.lower().rstrip(".")
        table, version = self._config()
        spec = table.get(host)
        if not isinstance(spec, dict):
            raise socket.gaierror(*ERRORS["EAI_NONAME"])
        if float(spec.get("delay_s", 0)) > 0:
            time.sleep(float(spec["delay_s"]))
        address = str(spec.get("address", "127.0.0.1"))
        if not ipaddress.ip_address(address).is_loopback:  # the hook never sends a delivery off this machine
            raise socket.gaierror(*ERRORS["EAI_FAIL"])
        applies = str(spec.get("functions", "")).lower() in self.function_name.lower()
        fail = int(spec.get("fail", 0))
        if applies and fail and self._count(host, version) <= (fail if fail > 0 else 1 << 62):
            code, text = ERRORS.get(str(spec.get("error", "EAI_AGAIN")), ERRORS["EAI_AGAIN"])
            self._log(host, str(spec.get("error", "EAI_AGAIN")))
            raise socket.gaierror(code, text)
        return address

    def _count(self, host: str, version: int) -> int:
        """This lookup's number (1-based) for ``host`` since the config last changed, across processes."""
        with open(self.lock_file, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                counts = json.loads(self.counts_file.read_text())
            except (OSError, ValueError):
                counts = {}
            if counts.get("version") != version:
                counts = {"version": version, "hosts": {}}
            counts["hosts"][host] = counts["hosts"].get(host, 0) + 1
            tmp = self.counts_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(counts))
            tmp.replace(self.counts_file)
            return int(counts["hosts"][host])

    def _log(self, host: str, error: str) -> None:
        line = {"t": time.time(), "kind": "dns_failure", "key": host, "error": error, "function": self.function_name}
        with contextlib.suppress(OSError), open(self.log_file, "a") as out:
            out.write(json.dumps(line) + "\n")


def install(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Wrap ``socket.getaddrinfo`` in this process when the runner asked for it; True if installed."""
    path = environ.get(ENV)
    if not path:
        return False
    table = Table(Path(path), environ.get("AWS_LAMBDA_FUNCTION_NAME", ""))
    system = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if not isinstance(name, str) or not name.lower().rstrip(".").endswith(SUFFIX):
            return system(host, port, family, type, proto, flags)
        address = table.lookup(name)
        return system(address, port, family, type, proto, flags | socket.AI_NUMERICHOST)

    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    return True
