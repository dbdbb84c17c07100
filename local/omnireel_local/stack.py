"""The local stack supervisor: ``python -m omnireel_local.stack --home DIR [--moto-port N] [--api-port N] ...``.

One process that owns everything ``omnireel local up`` starts:

- the moto server (a thread, 127.0.0.1) with Step Functions execution on and the moto patches (``patches/``) applied;
- the Lambda runner's warm worker processes (children, started on demand);
- one vLLM-Omni container emulator process per SageMaker Model in the template, with that Model's Environment;
- the API front door (a thread) serving the HTTP API's routes;
- the TTS relay (``relay/omnireel_relay``, a child process) in front of the TTS model's emulator WebSocket, with a
  bearer token generated per start (``--no-relay`` skips it; without a TTS model in the template -- EnableVoice=false
  -- there is no relay unless ``--relay`` asks for one, served by a dedicated speech emulator).

It provisions the local AWS from template.yaml (roles with their policies), then switches IAM enforcement on: from
then on every call is SigV4-signed by a known identity and authorised by its policies (``iam.identities`` names them:
the stack's admin, the API Gateway identity of the front door, the developer's IAM user whose key the CLI and
``omnireel local env`` use, and a session of its own template role for every Lambda function). It records ports,
pids and outputs in ``<home>/state.json`` (``phase`` shows progress; ``ready: true`` when it can take jobs) and
runs until SIGTERM/SIGINT, then stops every child it started. All children share the supervisor's process group, so
nothing outlives ``omnireel local down``.
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

from omnireel_template import ROOT

from . import emulator_zygote, heap
from . import home as homedir
from .emulator_python import emulator_python
from .runtime_python import runtime_python

log = logging.getLogger("omnireel_local.stack")
EMULATOR_START_TIMEOUT_S = 60.0
RELAY_START_TIMEOUT_S = 30.0
RELAY_PATH = "/v1/audio/speech/stream"
MAX_RESTARTS = 3  # per supervised child (container emulators, the relay) over the stack's lifetime
SUPERVISED = ("emulator-", "relay")
# Issue 34 item 9: how many generation requests one instance of each template model serves at once (the container's
# own limit, emulator/capacity.py), from the template parameter that says so. Other models: the emulator's default, 1.
EMULATOR_CONCURRENCY = {
    "ImageModel": "ImageConcurrencyPerInstance",
    "VideoModel": "VideoMaxConcurrentInvocationsPerInstance",
}


def emulator_concurrency(provisioned: Any) -> dict[str, dict[str, str]]:
    """SageMaker model name -> the emulator environment setting its per-instance concurrency (EMULATOR_CONCURRENCY)."""
    out: dict[str, dict[str, str]] = {}
    for logical, parameter in EMULATOR_CONCURRENCY.items():
        model = provisioned.physical.get(logical, {}).get("Attrs", {}).get("ModelName")
        value = provisioned.parameters.get(parameter)
        if model and value is not None:
            out[model] = {"OMNIREEL_EMULATOR_CONCURRENCY_PER_INSTANCE": str(value)}
    return out


class Stack:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.home = Path(args.home).resolve()
        self.logs = self.home / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        (self.home / homedir.EVENTS_LOG).unlink(missing_ok=True)  # a new local AWS: no jobs, no events yet
        self.region = args.region
        self.account_id = homedir.ACCOUNT_ID
        # Fixed default ports (homedir.PortPlan; a taken one falls back to a free port, logged); 0 = a free port.
        self.ports = homedir.PortPlan(ephemeral=args.ephemeral_ports)
        self.moto_port = args.moto_port or (self.ports.port("aws") if args.moto_port is None else homedir.free_port())
        self.api_port = args.api_port or (self.ports.port("api") if args.api_port is None else homedir.free_port())
        self.moto_endpoint = f"http://127.0.0.1:{self.moto_port}"
        self.children: dict[str, Any] = {}  # name -> subprocess.Popen, or a zygote.ForkedProcess (emulators)
        self._emulator_template: emulator_zygote.EmulatorTemplate | None = None
        self._emulator_template_failed = False
        self._specs: dict[str, tuple[list[str], dict[str, str]]] = {}  # how each child was started (restarts)
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
        # One client for the supervisor's own loopback calls (readiness polls): httpx.get() builds a client, and with
        # it an SSL context (~50 ms of CPU), on every call.
        self.http = httpx.Client(timeout=10)
        self.server: Any = None
        self.runner: Any = None
        self.hosting: Any = None
        self.invoker: Any = None
        self.roles: Any = None
        self.front_door: Any = None
        self.scheduler: Any = None
        self.pollers: Any = None
        self.admin: Any = None  # identities.Credentials of the stack's admin user (never written to state.json)

    # ---------------------------------------------------------------- state
    def save(self, **changes: Any) -> None:
        with self._state_lock:
            self.state.update(changes)
            pids = {name: proc.pid for name, proc in self.children.items() if proc.poll() is None}
            if self._emulator_template is not None and self._emulator_template.alive():
                pids["emulator-template"] = self._emulator_template.pid
            if self.runner is not None:
                pids.update({f"lambda-worker-{pid}": pid for pid in self.runner.pids()})
                pids.update({f"lambda-template-{pid}": pid for pid in self.runner.template_pids()})
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
        # Roles attach AWS managed policies (AWSLambdaBasicExecutionRole...): load moto's bundled copies (~0.2 s).
        os.environ["MOTO_IAM_LOAD_MANAGED_POLICIES"] = "true"

        # The container emulators run with .venv-emulator's Python (PyAV, numpy): fail now, before moto starts, if
        # there is none.
        self.emulator_python = emulator_python()

        self.phase("starting the local AWS (moto)")
        from . import fault_injection, http_headers, patches
        from .aws_server import AwsServer
        from .iam import identities
        from .lambda_runner import FunctionCode, LambdaRunner
        from .patches import speed
        from .sagemaker_hosting import SageMakerHosting

        roles = self.roles = identities.ServiceCredentials(self.account_id, self.region)
        self.runner = LambdaRunner(
            self.moto_endpoint,
            self.region,
            self.logs,
            self.args.lambda_workers,
            credentials=lambda name, role, valid_for: roles.get(
                role, "lambda.amazonaws.com", name, valid_for=valid_for
            ),
            faults_file=self.home / fault_injection.CONFIG_FILE,
        )

        fault_injection.configure(self.home)  # off unless OMNIREEL_LOCAL_FAULTS / <home>/fault-injection.json
        # moto patch 31 before the first request (``patches.apply`` below installs the others; it skips this one):
        # the admin user's calls come first, and moto's own account lookup would create all six IAM partitions for
        # them, ~1,600 managed policies each (py-spy: ~0.8 s of every stack's start).
        speed.patch_account_lookup()
        http_headers.install()  # this process's header blocks without the email parser when plain (http_headers.py)
        self.server = AwsServer("127.0.0.1", self.moto_port)
        self.server.start()
        self.http.post(
            f"{self.moto_endpoint}/moto-api/config", json={"stepfunctions": {"execute_state_machine": True}}, timeout=10
        ).raise_for_status()
        # The admin identity exists before enforcement is switched on (moto accepts any key until then).
        self.admin = identities.create_user(self._client("iam", bootstrap=True), identities.ADMIN_USER,
                                            identities.ADMIN_POLICY)  # fmt: skip
        self.hosting = SageMakerHosting(
            self.moto_endpoint,
            self.region,
            self.account_id,
            lambda role: roles.get(role, "sagemaker.amazonaws.com", "omnireel-local-sagemaker"),
            start_container=self._start_container_on_demand,
        )
        sqs = self._client("sqs")

        def sqs_send(queue_arn: str, body: str) -> None:
            url = sqs.get_queue_url(QueueName=queue_arn.split(":")[-1])["QueueUrl"]
            sqs.send_message(QueueUrl=url, MessageBody=body)

        self.invoker = patches.apply(self.runner, self.hosting, sqs_send, roles)

        self.phase("provisioning from template.yaml")
        from .provision import Provisioner

        overrides = dict(p.split("=", 1) for p in self.args.parameter)
        provisioned = Provisioner(
            self.moto_endpoint,
            stack_name=self.args.stack_name,
            region=self.region,
            account_id=self.account_id,
            parameter_overrides=overrides,
            credentials=self.admin.boto(),
        ).run()
        for name, spec in provisioned.functions.items():
            self.runner.register(name, FunctionCode(Path(spec["code_dir"]), tuple(Path(p) for p in spec["layer_dirs"])))
        for logical, rtype, reason in provisioned.skipped:
            log.info("not provisioned locally: %s (%s): %s", logical, rtype, reason)
        self.save(provisioned=provisioned.summary())

        self.phase("switching IAM enforcement on")
        iam = self._client("iam")
        front_door_identity = identities.create_user(
            iam,
            identities.APIGATEWAY_USER,
            identities.apigateway_policy(provisioned.invoke_permissions.get("apigateway.amazonaws.com", [])),
        )
        developer = identities.create_user(
            iam,
            identities.DEVELOPER_USER,
            identities.developer_policy(self.args.stack_name, self.region, self.account_id),
        )
        developer_id = iam.get_user(UserName=identities.DEVELOPER_USER)["User"]["UserId"]  # its caller scope (AIDA...)
        patches.enforce_iam(self.moto_endpoint)
        self.save(
            developer={
                "user": identities.DEVELOPER_USER,
                "arn": f"arn:aws:iam::{self.account_id}:user/{identities.DEVELOPER_USER}",
                "user_id": developer_id,
                "access_key_id": developer.access_key_id,
                "secret_access_key": developer.secret_access_key,
            }
        )

        from .emulator.config import kinds_for_model

        has_tts = any("speech" in kinds_for_model(env.get("SM_VLLM_MODEL", "")) for env in provisioned.models.values())
        relay_wanted = bool(self.args.relay) or (self.args.relay is None and has_tts)
        if self.args.relay is None and not has_tts:
            log.info("no TTS model in the template (EnableVoice=false): no relay (`--relay` forces one)")
        self.phase(
            f"starting {len(provisioned.models)} container emulator(s)" + (" and the TTS relay" if relay_wanted else "")
        )
        emulators = {}
        concurrency = emulator_concurrency(provisioned)
        for model_name, env in provisioned.models.items():
            emulators[model_name] = self._start_emulator(model_name, {**env, **concurrency.get(model_name, {})})
        # The relay starts alongside the emulators (it connects upstream per session, so it need not wait for them).
        relay = self._start_relay(provisioned.models, emulators) if relay_wanted else {}
        self.save()
        deadline = time.monotonic() + EMULATOR_START_TIMEOUT_S
        for model_name, url in emulators.items():
            self._wait_http(f"{url}/ping", deadline, f"emulator for {model_name}", EMULATOR_START_TIMEOUT_S)
            self.hosting.attach(model_name, url)
        self.state["emulators"] = emulators
        self.hosting.template_containers_attached()
        if relay:
            self._wait_relay(relay)

        self.phase("creating the CLI's job-events subscription")
        outputs = dict(provisioned.outputs)
        events_queue = self._events_queue(outputs.get("JobEventsTopicArn"))

        self.phase("starting the API front door")
        from .api_gateway import FrontDoor

        self.front_door = FrontDoor(
            provisioned.routes, self.moto_endpoint, self.region, self.account_id, credentials=front_door_identity.boto()
        )
        self.front_door.serve("127.0.0.1", self.api_port)
        outputs["ApiUrl"] = self.state["api_url"]  # the deployed value is an execute-api URL
        if relay:
            outputs["RelayUrl"] = relay["url"]  # the deployed value is the load balancer's wss:// URL
            self._store_relay_token(outputs.get("RelayTokenSecretArn"), relay["token"])

        self.scheduler = self._start_schedules(provisioned.schedules)
        self.pollers = self._start_event_sources(roles)
        self.state["webhook_secret"] = self._webhook_secret(outputs.get("WebhookSigningSecretArn"))
        self.save(outputs=outputs, events_queue_url=events_queue, relay=relay)
        # What startup built (moto's service models and backends, the provisioned stack: millions of objects) lives as
        # long as the process: the cyclic GC stops re-scanning it. A full collection walked all of it, ~0.45 s with the
        # GIL held, stalling whatever request was in flight (a job's hop took 0.4-0.6 s instead of ~0.05 s). Frozen
        # without a collection first (that would cost the same 0.45 s at every start): startup's few cyclic leftovers
        # stay in memory. Then a higher young-generation threshold (omnireel_local/heap.py).
        heap.settle(collect=False)
        self.phase("ready")
        # Issue 37 item 3: which documented ports were taken and where their servers went instead, for `local up` and
        # `local status` to say (a shell with the documented AWS_ENDPOINT_URL would talk to someone else's stack).
        self.save(ready=True, port_moves=self.ports.moves())
        threading.Thread(target=self._refresh, name="state-refresh", daemon=True).start()

    def _webhook_secret(self, arn: str | None) -> str | None:
        """The developer identity's own whsec_ secret (what GET /webhooks/secret answers it), for `omnireel local env`
        (OMNIREEL_WEBHOOK_SECRET) and local receivers of the jobs the CLI submits. Derived from the master key as the
        API derives it (omnireel.webhooks.secrets); a later `omnireel webhooks rotate` is not reflected here."""
        if not arn:
            return None
        from omnireel.webhooks.secrets import parse_master, scope_secret

        keys = parse_master(self._client("secretsmanager").get_secret_value(SecretId=arn)["SecretString"])
        developer = self.state["developer"]["user_id"]  # its caller scope: its IAM unique id (omnireel.core.caller)
        return scope_secret(keys.key, developer)

    def _start_schedules(self, schedules: list[dict[str, Any]]) -> Any:
        """EventBridge schedule rules -> their Lambda targets, invoked asynchronously (schedules.py says why)."""
        from moto.awslambda.utils import get_backend

        from .schedules import Scheduler

        def invoke(function_arn: str, payload: str) -> Any:
            fn = get_backend(self.account_id, self.region).get_function(function_arn)
            return self.invoker.submit(fn, payload, "events")

        scheduler = Scheduler(schedules, invoke, self.account_id, self.region)
        scheduler.start()
        return scheduler

    def _start_event_sources(self, roles: Any) -> Any:
        """SQS event source mappings -> their functions, polled as the Lambda service does (event_sources.py)."""
        import boto3
        from moto.awslambda.utils import get_backend

        from . import patches
        from .event_sources import SqsMapping, SqsPollers

        clients: dict[tuple[str, str], Any] = {}
        lock = threading.Lock()

        def sqs_client_for(role_arn: str) -> Any:
            credentials = roles.get(role_arn, "lambda.amazonaws.com", "omnireel-local-event-source")
            with lock:
                key = (role_arn, credentials.access_key_id)
                if key not in clients:
                    clients[key] = boto3.client(
                        "sqs", endpoint_url=self.moto_endpoint, region_name=self.region, **credentials.boto()
                    )
                return clients[key]

        pollers = SqsPollers(
            [SqsMapping.from_spec(uuid_, spec) for uuid_, spec in patches.SQS_EVENT_SOURCES],
            function_of=lambda arn: get_backend(self.account_id, self.region).get_function(arn),
            invoke=self.invoker.run,
            sqs_client_for=sqs_client_for,
            queue_url_of=lambda arn: f"{self.moto_endpoint}/{arn.split(':')[4]}/{arn.rsplit(':', 1)[-1]}",
            region=self.region,
            # a deleted mapping (None) polls no more, as a disabled one
            enabled_of=lambda esm_uuid: bool(
                getattr(get_backend(self.account_id, self.region).get_event_source_mapping(esm_uuid), "enabled", False)
            ),
        )
        pollers.start()
        return pollers

    def _client(self, service: str, *, bootstrap: bool = False) -> Any:
        """A client as the stack's admin (``bootstrap``: any key, before the admin exists and enforcement is on)."""
        import boto3

        credentials = (
            {"aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"} if bootstrap else self.admin.boto()
        )
        return boto3.client(service, endpoint_url=self.moto_endpoint, region_name=self.region, **credentials)

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> Any:
        log_file = open(self.logs / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            proc = self._fork_emulator(argv, env, log_file)
            if proc is None:
                proc = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        finally:
            log_file.close()
        self.children[name] = proc
        self._specs[name] = (argv, env)
        log.info("started %s (pid %d%s)", name, proc.pid, "" if isinstance(proc, subprocess.Popen) else ", forked")
        return proc

    def _fork_emulator(self, argv: list[str], env: dict[str, str], log_file: Any) -> Any:
        """``argv`` (a container emulator's command) forked from the stack's emulator template (``emulator_zygote``),
        or None: the caller then starts it as an interpreter (not an emulator, templates off or unsupported, or the
        template cannot fork: logged once)."""
        prefix = [self.emulator_python, "-m", "omnireel_local.emulator"]
        if argv[:3] != prefix or self._emulator_template_failed or not emulator_zygote.enabled():
            return None
        try:
            if self._emulator_template is None or not self._emulator_template.alive():
                if self._emulator_template is not None:
                    log.warning("the emulator template (pid %d) exited; starting another", self._emulator_template.pid)
                    self._emulator_template.stop()
                self._emulator_template = emulator_zygote.EmulatorTemplate(
                    self.emulator_python, dict(os.environ), ROOT, self.logs / "emulator-template.log"
                )
            return self._emulator_template.fork(argv[3:], env, log_file)
        except OSError as exc:
            log.warning("emulators: the template cannot fork (%s); each emulator starts an interpreter", exc)
            self._emulator_template_failed = True
            return None

    def _start_emulator(self, model_name: str, env: dict[str, str]) -> str:
        """One container emulator per SageMaker Model, with the Model's container Environment (SM_VLLM_MODEL...)."""
        port = self.ports.port("emulator", len([n for n in self.children if n.startswith("emulator-")]))
        child_env = {**os.environ, **env, "PYTHONUNBUFFERED": "1"}
        argv = [self.emulator_python, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)]
        if env.get("SM_VLLM_MODEL"):
            argv += ["--model", env["SM_VLLM_MODEL"]]
        self._spawn(f"emulator-{model_name}", argv, child_env)
        return f"http://127.0.0.1:{port}"

    def _start_container_on_demand(self, model_name: str, env: dict[str, str]) -> str:
        """An emulator for a DLC-image model created outside the template (CreateEndpoint through the local AWS, e.g.
        the AWS sample's deploy.py): same process model as the template's, supervised and stopped with the stack."""
        url = self._start_emulator(model_name, env)
        self._wait_http(f"{url}/ping", time.monotonic() + EMULATOR_START_TIMEOUT_S, f"emulator for {model_name}",
                        EMULATOR_START_TIMEOUT_S)  # fmt: skip
        with self._state_lock:
            self.state.setdefault("emulators", {})[model_name] = url
        self.save()
        return url

    def _wait_http(self, url: str, deadline: float, what: str, budget: float) -> None:
        while time.monotonic() < deadline:
            try:
                if self.http.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            dead = [n for n, p in self.children.items() if p.poll() is not None]
            if dead:
                raise RuntimeError(f"{', '.join(dead)} exited during startup; see {self.logs}")
            time.sleep(0.2)
        raise TimeoutError(f"{what} did not become healthy at {url} within {budget:.0f} s")

    def _events_queue(self, topic_arn: str | None) -> str | None:
        """A durable SQS queue subscribed to the job-events topic: what `omnireel events` consumes."""
        if not topic_arn:
            return None
        sqs, sns = self._client("sqs"), self._client("sns")
        url = sqs.create_queue(QueueName=f"{self.args.stack_name}-cli-job-events")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=arn)
        return url

    def _start_relay(self, models: dict[str, dict[str, str]], emulators: dict[str, str]) -> dict[str, Any]:
        """Spawn the TTS relay (relay/omnireel_relay); upstream = the WebSocket of the template's TTS model emulator.

        On AWS the relay reaches the TTS endpoint through SageMaker's bidirectional-streaming API, which moto does not
        have; locally it talks the same vLLM-Omni WebSocket protocol to the emulator directly. Returns {} when the
        template has no TTS model (EnableVoice=false) and the relay was not asked for explicitly (``--relay``).
        Readiness is checked by ``_wait_relay``.
        """
        from .emulator.config import kinds_for_model

        upstream = next(
            (emulators[m] for m, env in models.items() if "speech" in kinds_for_model(env.get("SM_VLLM_MODEL", ""))),
            None,
        )
        dedicated = None
        if upstream is None:
            if not self.args.relay:
                log.info("no TTS model in the template (EnableVoice=false): no relay (`--relay` forces one)")
                return {}
            # --relay without a TTS model: serve speech from a dedicated emulator.
            port = self.ports.port("emulator", len([n for n in self.children if n.startswith("emulator-")]))
            argv = [self.emulator_python, "-m", "omnireel_local.emulator", "--host", "127.0.0.1", "--port", str(port)]
            self._spawn("emulator-speech", [*argv, "--routes", "speech"], {**os.environ, "PYTHONUNBUFFERED": "1"})
            upstream = dedicated = f"http://127.0.0.1:{port}"
        port, token = self.ports.port("relay"), secrets.token_urlsafe(32)  # URL-safe base64: HTTP token characters
        upstream_url = upstream.replace("http://", "ws://") + RELAY_PATH
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMNIREEL_RELAY_")}  # nothing inherited
        env.update(
            {
                "OMNIREEL_RELAY_HOST": "127.0.0.1",
                "OMNIREEL_RELAY_PORT": str(port),
                "OMNIREEL_RELAY_UPSTREAM": "websocket",
                "OMNIREEL_RELAY_UPSTREAM_URL": upstream_url,
                "OMNIREEL_RELAY_TOKEN": token,
                "OMNIREEL_RELAY_DRAIN_SECONDS": "2",  # `local down` waits 5 s for its children
                "PYTHONUNBUFFERED": "1",
            }
        )
        self._spawn("relay", [runtime_python(), "-m", "omnireel_relay"], env)
        return {
            "url": f"ws://127.0.0.1:{port}{RELAY_PATH}",
            "token": token,
            "port": port,
            "upstream_url": upstream_url,
            "health_url": f"http://127.0.0.1:{port}/healthz",
            **({"speech_emulator_url": dedicated} if dedicated else {}),
        }

    def _wait_relay(self, relay: dict[str, Any]) -> None:
        """Readiness: GET /healthz answers 200 (bounded by RELAY_START_TIMEOUT_S)."""
        if relay.get("speech_emulator_url"):
            url, budget = f"{relay['speech_emulator_url']}/ping", EMULATOR_START_TIMEOUT_S
            self._wait_http(url, time.monotonic() + budget, "speech emulator", budget)
        budget = RELAY_START_TIMEOUT_S
        self._wait_http(relay["health_url"], time.monotonic() + budget, "the TTS relay", budget)

    def _store_relay_token(self, secret_arn: str | None, token: str) -> None:
        """Put the token into the template's relay token secret too, as on AWS (where the relay reads it there)."""
        if not secret_arn:
            return
        try:
            self._client("secretsmanager").put_secret_value(SecretId=secret_arn, SecretString=token)
        except Exception as exc:  # noqa: BLE001 - the CLI reads the token from state.json locally
            log.warning("could not store the relay token in %s: %s", secret_arn, exc)

    def _refresh(self) -> None:
        while not self._stop.wait(2.0):
            self.supervise()
            with contextlib.suppress(OSError):
                self.save()

    def supervise(self) -> None:
        """Restart a container emulator or the relay that died (same argv, env and port), at most MAX_RESTARTS
        times each, every restart logged; past that it stays down and is recorded as dead for `local status`."""
        supervision = self.state.setdefault("supervision", {"restarts": {}, "dead": {}})
        for name, proc in list(self.children.items()):
            code = proc.poll()
            if code is None or not name.startswith(SUPERVISED) or self._stop.is_set() or name in supervision["dead"]:
                continue
            restarts = supervision["restarts"].get(name, 0)
            if restarts >= MAX_RESTARTS:
                log.error("%s (pid %d) exited with %s; not restarted (%d restarts already)", name, proc.pid, code,
                          restarts)  # fmt: skip
                supervision["dead"][name] = {"exit_code": code, "restarts": restarts, "at": time.time()}
                continue
            log.warning("%s (pid %d) exited with %s; restarting it (%d/%d)", name, proc.pid, code, restarts + 1,
                        MAX_RESTARTS)  # fmt: skip
            supervision["restarts"][name] = restarts + 1
            argv, env = self._specs[name]
            self._spawn(name, argv, env)

    # ---------------------------------------------------------------- stop
    def stop(self) -> None:
        self._stop.set()
        log.info("stopping")
        for part in (self.scheduler, self.pollers, self.front_door, self.invoker, self.hosting):
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
        if self._emulator_template is not None:
            self._emulator_template.stop()
        if self.server is not None:
            try:
                self.server.stop()
            except Exception:
                log.exception("error while stopping the moto server")
        self.http.close()
        self.save(ready=False, phase="stopped", stopped_at=time.time())
        log.info("stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omnireel_local.stack")
    parser.add_argument("--home", default=str(homedir.home()))
    parser.add_argument("--moto-port", type=int, help="local AWS port (default 4710, 0 = a free port)")
    parser.add_argument("--api-port", type=int, help="HTTP API port (default 4711, 0 = a free port)")
    parser.add_argument(
        "--ephemeral-ports", action="store_true",
        help="a free port for every part instead of the fixed defaults (tests, parallel stacks)",
    )  # fmt: skip
    parser.add_argument("--region", default=homedir.REGION)
    parser.add_argument("--stack-name", default=homedir.STACK_NAME)
    parser.add_argument("--parameter", action="append", default=[], help="template parameter override Name=Value")
    parser.add_argument("--lambda-workers", type=int, default=4, help="max warm workers per function")
    relay = parser.add_mutually_exclusive_group()
    relay.add_argument(
        "--relay", dest="relay", action="store_true", default=None,
        help="start the TTS relay even without a TTS model in the template (a dedicated speech emulator serves it)",
    )  # fmt: skip
    relay.add_argument("--no-relay", dest="relay", action="store_false", help="do not start the TTS relay")
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
    code = main()
    # By now every process the stack started is stopped and its state file written. Skip the interpreter's own
    # teardown: collecting moto's in-memory backends at exit took ~4 s of every `local down` (nothing registers
    # atexit work here; logs are flushed first).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
