"""The local stack supervisor: ``python -m omnireel_local.stack --home DIR [--moto-port N] [--api-port N] ...``.

One process that owns everything ``omnireel local up`` starts:

- the moto server (a thread, 127.0.0.1) with Step Functions execution on and ``moto_patches`` applied;
- the Lambda runner's warm worker processes (children, started on demand);
- one vLLM-Omni container emulator process per SageMaker Model in the template, with that Model's Environment;
- the API front door (a thread) serving the HTTP API's routes;
- optionally the TTS relay (a child process) in front of a speech emulator.

It provisions the local AWS from template.yaml, records ports, pids and outputs in ``<home>/state.json``
(``phase`` shows progress; ``ready: true`` when it can take jobs) and runs until SIGTERM/SIGINT, then stops every
child it started. All children share the supervisor's process group, so nothing outlives ``omnireel local down``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from . import home as homedir
from .cfn_template import ROOT

log = logging.getLogger("omnireel_local.stack")
EMULATOR_START_TIMEOUT_S = 60.0


class Stack:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.home = Path(args.home).resolve()
        self.logs = self.home / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.region = args.region
        self.account_id = homedir.ACCOUNT_ID
        self.moto_port = args.moto_port or homedir.free_port()
        self.api_port = args.api_port or homedir.free_port()
        self.moto_endpoint = f"http://127.0.0.1:{self.moto_port}"
        self.children: dict[str, subprocess.Popen[bytes]] = {}
        self.state: dict[str, Any] = {
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "started_at": time.time(),
            "ready": False,
            "phase": "starting",
            "region": self.region,
            "stack_name": args.stack_name,
            "moto_port": self.moto_port,
            "api_port": self.api_port,
            "endpoint_url": self.moto_endpoint,
            "api_url": f"http://127.0.0.1:{self.api_port}",
            "logs": str(self.logs),
        }
        self._stop = threading.Event()
        self._state_lock = threading.Lock()
        self.server: Any = None
        self.runner: Any = None
        self.hosting: Any = None
        self.invoker: Any = None
        self.front_door: Any = None

    # ---------------------------------------------------------------- state
    def save(self, **changes: Any) -> None:
        with self._state_lock:
            self.state.update(changes)
            pids = {name: proc.pid for name, proc in self.children.items() if proc.poll() is None}
            if self.runner is not None:
                pids.update({f"lambda-worker-{pid}": pid for pid in self.runner.pids()})
            self.state["child_pids"] = pids
            homedir.write_state(self.state, self.home)

    def phase(self, text: str) -> None:
        log.info("%s", text)
        self.save(phase=text)

    # ---------------------------------------------------------------- start
    def start(self) -> None:
        os.environ["MOTO_PORT"] = str(self.moto_port)  # moto's Step Functions calls services back on this port
        os.environ.update({**homedir.CREDENTIALS, "AWS_DEFAULT_REGION": self.region})
        os.environ.pop("AWS_ENDPOINT_URL", None)
        os.environ.pop("AWS_PROFILE", None)

        self.phase("starting the local AWS (moto)")
        from moto.moto_server.threaded_moto_server import ThreadedMotoServer

        from . import moto_patches
        from .lambda_runner import FunctionCode, LambdaRunner
        from .sagemaker_hosting import SageMakerHosting

        self.runner = LambdaRunner(self.moto_endpoint, self.region, self.logs, self.args.lambda_workers)
        self.hosting = SageMakerHosting(self.moto_endpoint, self.region, self.account_id)
        sqs = self._client("sqs")

        def sqs_send(queue_arn: str, body: str) -> None:
            url = sqs.get_queue_url(QueueName=queue_arn.split(":")[-1])["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody=body)

        self.invoker = moto_patches.apply(self.runner, self.hosting, sqs_send)
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.moto_port, verbose=False)
        self.server.start()
        httpx.post(
            f"{self.moto_endpoint}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=10
        ).raise_for_status()

        self.phase("provisioning from template.yaml")
        from .provision import Provisioner

        overrides = dict(p.split("=", 1) for p in self.args.parameter)
        provisioned = Provisioner(
            self.moto_endpoint,
            stack_name=self.args.stack_name,
            region=self.region,
            account_id=self.account_id,
            parameter_overrides=overrides,
        ).run()
        for name, spec in provisioned.functions.items():
            self.runner.register(name, FunctionCode(Path(spec["code_dir"]), tuple(Path(p) for p in spec["layer_dirs"])))
        for logical, rtype, reason in provisioned.skipped:
            log.info("not provisioned locally: %s (%s): %s", logical, rtype, reason)
        self.save(provisioned=provisioned.summary())

        self.phase(f"starting {len(provisioned.models)} container emulator(s)")
        emulators = {}
        for model_name, env in provisioned.models.items():
            emulators[model_name] = self._start_emulator(model_name, env)
        self.save()
        deadline = time.monotonic() + EMULATOR_START_TIMEOUT_S
        for model_name, url in emulators.items():
            self._wait_http(f"{url}/ping", deadline, f"emulator for {model_name}")
            self.hosting.attach(model_name, url)
        self.state["emulators"] = emulators

        self.phase("creating the CLI's job-events subscription")
        outputs = dict(provisioned.outputs)
        events_queue = self._events_queue(outputs.get("JobEventsTopicArn"))

        self.phase("starting the API front door")
        from .api_gateway import FrontDoor

        self.front_door = FrontDoor(provisioned.routes, self.moto_endpoint, self.region, self.account_id)
        self.front_door.serve("127.0.0.1", self.api_port)
        outputs["ApiUrl"] = self.state["api_url"]  # the deployed value is an execute-api URL

        relay: dict[str, str] = {}
        if self.args.relay:
            self.phase("starting the TTS relay")
            relay = self._start_relay(provisioned.models, emulators)

        self.save(outputs=outputs, events_queue_url=events_queue, relay=relay)
        self.phase("ready")
        self.save(ready=True)
        threading.Thread(target=self._refresh, name="state-refresh", daemon=True).start()

    def _client(self, service: str) -> Any:
        import boto3

        return boto3.client(
            service,
            endpoint_url=self.moto_endpoint,
            region_name=self.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",  # noqa: S106
        )

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log_file = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        log_file.close()
        self.children[name] = proc
        log.info("started %s (pid %d)", name, proc.pid)
        return proc

    def _start_emulator(self, model_name: str, env: dict[str, str]) -> str:
        """One container emulator per SageMaker Model, with the Model's container Environment (SM_VLLM_MODEL...)."""
        port = homedir.free_port()
        child_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        argv = [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)]
        if env.get("SM_VLLM_MODEL"):
            argv += ["--model", env["SM_VLLM_MODEL"]]
        self._spawn(f"emulator-{model_name}", argv, child_env)
        return f"http://127.0.0.1:{port}"

    def _wait_http(self, url: str, deadline: float, what: str) -> None:
        while time.monotonic() < deadline:
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            dead = [n for n, p in self.children.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited during startup; see {self.logs}")
            time.sleep(0.2)
        raise TimeoutError(f"{what} did not become healthy at {url} within {EMULATOR_START_TIMEOUT_S:.0f} s")

    def _events_queue(self, topic_arn: str | None) -> str | None:
        """A durable SQS queue subscribed to the job-events topic: what `omnireel events` consumes."""
        if not topic_arn:
            return None
        sqs, sns = self._client("sqs"), self._client("sns")
        url = sqs.create_queue(QueueName=f"{self.args.stack_name}-cli-job-events")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
        return url

    def _start_relay(self, models: dict[str, dict[str, str]], emulators: dict[str, str]) -> dict[str, str]:
        """The TTS relay (relay/omnireel_relay), upstream = the WebSocket of the template's TTS model emulator.

        On AWS the relay reaches the TTS endpoint through SageMaker's bidirectional-streaming API, which moto does not
        have; locally it talks the same vLLM-Omni WebSocket protocol to the emulator directly.
        """
        from .emulator.config import kinds_for_model

        upstream = next(
            (emulators[m] for m, env in models.items() if "speech" in kinds_for_model(env.get("SM_VLLM_MODEL", ""))),
            None,
        )
        if upstream is None:  # the template has no TTS model: serve speech from a dedicated emulator
            port = homedir.free_port()
            argv = [sys.executable, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)]
            self._spawn("emulator-speech", [*argv, "--routes", "speech"], {**os.environ, "PYTHONUNBUFFERED": "1"})
            upstream = f"http://127.0.0.1:{port}"
            self._wait_http(f"{upstream}/ping", time.monotonic() + 30, "speech emulator")
        port, token = homedir.free_port(), secrets.token_urlsafe(24)
        env = {
            **os.environ,
            "OMNIREEL_RELAY_HOST": "127.0.0.1",
            "OMNIREEL_RELAY_PORT": str(port),
            "OMNIREEL_RELAY_UPSTREAM": "websocket",
            "OMNIREEL_RELAY_UPSTREAM_URL": upstream.replace("http://", "ws://") + "/v1/audio/speech/stream",
            "OMNIREEL_RELAY_TOKEN": token,
            "PYTHONUNBUFFERED": "1",
        }
        self._spawn("relay", [sys.executable, "-m", "omnireel_relay"], env)
        self._wait_http(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 30, "relay")
        return {"url": f"ws://127.0.0.1:{port}/v1/audio/speech/stream", "token": token}

    def _refresh(self) -> None:
        while not self._stop.wait(2.0):
            with contextlib.suppress(OSError):
                self.save()

    # ---------------------------------------------------------------- stop
    def stop(self) -> None:
        self._stop.set()
        log.info("stopping")
        for part in (self.front_door, self.invoker, self.hosting):
            if part is not None:
                try:
                    part.shutdown()
                except Exception:
                    log.exception("error while stopping %s", type(part).__name__)
        if self.runner is not None:
            self.runner.shutdown()
        for proc in self.children.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 5
        for name, proc in self.children.items():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %d) ignored SIGTERM; killing it", name, proc.pid)
                proc.kill()
                proc.wait(timeout=5)
        if self.server is not None:
            try:
                self.server.stop()
            except Exception:
                log.exception("error while stopping the moto server")
        self.save(ready=False, phase="stopped", stopped_at=time.time())
        log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omnireel_local.stack")
    parser.add_argument("--home", default=str(homedir.home()))
    parser.add_argument("--moto-port", type=int, default=0)
    parser.add_argument("--api-port", type=int, default=0)
    parser.add_argument("--region", default=homedir.REGION)
    parser.add_argument("--stack-name", default=homedir.STACK_NAME)
    parser.add_argument("--parameter", action="append", default=[], help="template parameter override Name=Value")
    parser.add_argument("--lambda-workers", type=int, default=4, help="max warm workers per function")
    parser.add_argument("--relay", action="store_true", help="also start the TTS relay (and a speech emulator)")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)-7s %(name)s: %(message)s", stream=sys.stdout
    )
    for noisy in ("werkzeug", "botocore", "urllib3", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    stack = Stack(args)
    stopping = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("received signal %d", signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        stack.start()
    except Exception as exc:
        log.exception("startup failed")
        stack.save(phase="failed", error=f"{type(exc).__name__}: {exc}")
        stack.stop()
        stack.save(phase="failed", error=f"{type(exc).__name__}: {exc}")
        return 1
    print(f"omnireel local stack ready: AWS {stack.moto_endpoint}, API {stack.state['api_url']}", flush=True)
    while not stopping.wait(1.0):
        pass
    stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
