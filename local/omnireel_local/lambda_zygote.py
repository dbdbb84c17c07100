"""A template for Lambda execution environments: imports the libraries every function imports once, then forks a
fresh ``lambda_worker`` per cold start.

A cold start used to be a new interpreter that imported botocore, boto3, Powertools and msgspec from scratch: ~0.3 of
its ~0.8 CPU-s, and 160 cold starts in one ``make test``. ``omnireel_local.lambda_runner`` starts one template per
runtime (``python -m omnireel_local.lambda_zygote FD``, the interpreter its workers would run, with their coverage
and import-path variables) and asks it for a worker over the socket ``FD`` (``AF_UNIX``, ``SOCK_SEQPACKET``): one
JSON request ``{"handler", "paths", "env", "cwd"}`` with three descriptors (the worker's stdin, stdout and log),
answered ``{"pid"}`` with the child's pidfd, through which the runner watches and kills it (the template reaps it).

What a forked worker shares with the template, and why that is safe:
- Only third-party modules are imported here (``PRELOAD``), never the function's code or the domain layer: a worker
  imports its handler, its CodeUri folder and its layers itself, so a code change still reaches the next cold start.
- The child gets the function's environment in full (``os.environ`` replaced, ``TZ`` re-read), its working folder and
  its import path, exactly as ``python -m omnireel_local.lambda_worker`` would. Preloaded modules that read the
  environment when imported are listed in ``IMPORT_TIME_ENV``: the runner keys templates on those values (the
  runtime), and tests/integration/local/test_lambda_runner.py derives the module-level reads from the preloaded
  modules' source, so a new one cannot slip past.
- ``awscrt`` is unimportable here as in every worker (``lambda_worker.NOT_ON_LAMBDA``), before botocore is imported.
- Single-threaded: the template forks from a process with no other thread. Python reseeds ``random`` in a child;
  ``PYTHONHASHSEED`` is the one thing all of one template's workers share (Lambda gives each environment its own).
- botocore's service models (``MODEL_SERVICES``) are parsed here once, into a data loader every worker's botocore
  sessions use (``share_models``): a worker's first clients took ~20-50 ms of CPU each to parse their JSON models (130
  ms for six). Only parsed JSON is shared, read-only as botocore treats it; clients, credentials, regions and every
  configuration value are still made by the worker from its own environment. A session asking for another data path
  (``AWS_DATA_PATH``) gets a loader of its own, as before.
- Coverage (tests): the template measures nothing it imports; with ``[tool.coverage.run] patch`` "fork" a child
  restarts coverage.py with the template's settings and writes its own data file when it exits.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import time
from typing import Any

from . import heap, zygote
from .runtime_python import STACK_SYS_PATH, restrict_path

# What every function imports before its own code (botocore's client machinery, boto3, Powertools' logger, metrics,
# event handler and batch utilities, msgspec): measured with -X importtime over the functions' handlers.
PRELOAD = (
    "botocore.session",
    "botocore.client",
    "botocore.endpoint",
    "botocore.parsers",
    "botocore.serialize",
    "botocore.credentials",
    "botocore.httpsession",
    "botocore.exceptions",
    "boto3",
    "boto3.session",
    "msgspec",
    "aws_lambda_powertools",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.utilities.batch",
    "aws_lambda_powertools.utilities.data_classes",
    "aws_lambda_powertools.utilities.typing",
)
# Environment variables the preloaded modules read at import (module level), so a worker sees the value they were
# imported with: the runner starts the template with the values every worker of its runtime gets.
IMPORT_TIME_ENV = ("AWS_EXECUTION_ENV", "AWS_LAMBDA_INITIALIZATION_TYPE", "BOTO_DISABLE_CRT")
# The services the domain package makes clients of (omnireel.aws.clients.client("..."); a test derives them from the
# source): their models are parsed in the template.
MODEL_SERVICES = ("cloudwatch", "dynamodb", "events", "s3", "sagemaker", "sagemaker-runtime", "secretsmanager", "sns",
                  "sqs", "stepfunctions")  # fmt: skip


def preload() -> None:
    from .lambda_worker import NOT_ON_LAMBDA

    for name in NOT_ON_LAMBDA:
        sys.modules[name] = None  # type: ignore[assignment]  # as in every worker: `import awscrt` fails
    for name in PRELOAD:
        importlib.import_module(name)
    share_models(MODEL_SERVICES)


def share_models(services: tuple[str, ...]) -> Any:
    """Parse ``services``' botocore models (what creating their clients reads) into one data loader, and make it the
    loader of every botocore session created afterwards in this process and its forks that asks for the default data
    path. Returns the loader."""
    import botocore.loaders
    import botocore.session

    session = botocore.session.get_session()
    default_path = session.get_config_variable("data_path")
    loader = botocore.loaders.create_loader(default_path)
    session.register_component("data_loader", loader)
    for service in services:  # a client made once loads its model, endpoint rules, partitions and retry rules
        session.create_client(service, region_name="us-east-1", endpoint_url="http://127.0.0.1:9",
                              aws_access_key_id="template", aws_secret_access_key="template")  # noqa: S106  # fmt: skip
    create_loader = botocore.loaders.create_loader

    def shared_loader(search_path_string: str | None = None) -> Any:
        return loader if search_path_string == default_path else create_loader(search_path_string)

    botocore.session.create_loader = shared_loader  # type: ignore[attr-defined]  # what Session's data_loader calls
    return loader


def _become_worker(request: dict[str, Any]) -> int:
    """In the child: the worker's descriptors, environment, folder and import path, then ``lambda_worker.main``."""
    stdin_fd, stdout_fd, log_fd = request["fds"]
    for fd, target in ((stdin_fd, 0), (stdout_fd, 1), (log_fd, 2)):
        os.dup2(fd, target)
    for fd in {stdin_fd, stdout_fd, log_fd} - {0, 1, 2}:
        os.close(fd)
    sys.stdin = open(0, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115 - the worker's input
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    sys.path[0] = request["cwd"]  # as `python -m` puts the working folder first
    argv = ["--handler", request["handler"]]
    for path in request["paths"]:
        argv += ["--path", path]
    sys.argv = ["omnireel_local.lambda_worker", *argv]
    from . import lambda_worker

    return lambda_worker.main(argv)


def main() -> int:
    control = socket.socket(fileno=int(sys.argv[1]))
    stack_path = os.environ.pop(STACK_SYS_PATH, None)  # another interpreter than the stack's: import from its path
    if stack_path is not None:
        sys.path[:] = restrict_path(sys.path, json.loads(stack_path))
    preload()
    heap.settle(young_threshold=None)  # workers inherit a frozen template: their collections skip what it imported
    request = zygote.serve(control, 3)  # the worker's stdin, stdout and log
    if request is None:
        return 0
    return _become_worker(request)


if __name__ == "__main__":
    sys.exit(main())
