"""The Lambda runner: warm reuse, Lambda's error shape, Timeout -> Sandbox.Timedout, init errors."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from omnireel_local import lambda_runner
from omnireel_local.iam.identities import Credentials
from omnireel_local.lambda_runner import CREDENTIAL_MARGIN_S, FunctionCode, Invocation, LambdaRunner
from tests.support.import_env import import_time_env_reads

HANDLER = """
import os, time
BOOT = time.time()

class StepError(Exception):
    pass

def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    if event.get("fail"):
        raise StepError('{"code": "Boom", "message": "it broke"}')
    return {"pid": os.getpid(), "boot": BOOT, "fn": context.function_name, "env": os.environ.get("GREETING"),
            "endpoint": os.environ.get("AWS_ENDPOINT_URL"), "remaining": context.get_remaining_time_in_millis(),
            "key": os.environ.get("AWS_ACCESS_KEY_ID"), "token": os.environ.get("AWS_SESSION_TOKEN"),
            "crt": _importable("awscrt"), "botocore_crt": _botocore_has_crt()}

def _importable(name):
    try:
        __import__(name)
        return True
    except ImportError:
        return False

def _botocore_has_crt():
    import botocore.compat
    return botocore.compat.HAS_CRT
"""


@pytest.fixture(params=["template", "interpreter"])
def runner(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Each behaviour holds for a worker forked from its template (lambda_zygote, the default) and for one started as
    a new interpreter (OMNIREEL_LAMBDA_TEMPLATE=0, and the runner's fallback)."""
    monkeypatch.setenv(lambda_runner.TEMPLATE_SWITCH, "1" if request.param == "template" else "0")
    code = tmp_path / "fn"
    code.mkdir()
    (code / "handler.py").write_text(HANDLER)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "handler.py").write_text("raise RuntimeError('bad config')\n")
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", max_workers_per_function=2)
    runner.register("fn", FunctionCode(code))
    runner.register("broken", FunctionCode(tmp_path / "broken"))
    yield runner
    runner.shutdown()


def invoke(runner: LambdaRunner, payload: dict, name: str = "fn", timeout: float = 10, env: dict | None = None):
    arn = f"arn:aws:lambda:us-east-1:123456789012:function:{name}"
    environment = env or {"GREETING": "hi"}
    return runner.invoke(
        Invocation(name, arn, "handler.handler", "python3.13", timeout, 128, environment, json.dumps(payload))
    )


def test_warm_reuse_and_environment(runner: LambdaRunner) -> None:
    first, second = invoke(runner, {}), invoke(runner, {})
    assert first.cold and not second.cold
    a, b = json.loads(first.payload), json.loads(second.payload)
    assert a["pid"] == b["pid"] and a["boot"] == b["boot"]  # same execution environment, init ran once
    assert (a["fn"], a["env"], a["endpoint"]) == ("fn", "hi", "http://127.0.0.1:9")
    # The deployed function has no awscrt (the layer does not ship it; .venv has it for the relay): nor does a worker.
    assert (a["crt"], a["botocore_crt"]) == (False, False)
    assert 0 < a["remaining"] <= 10_000
    changed = invoke(runner, {}, env={"GREETING": "bye"})  # new configuration -> new environment
    assert changed.cold and json.loads(changed.payload)["env"] == "bye"


def test_unhandled_exception_has_lambdas_error_shape(runner: LambdaRunner) -> None:
    result = invoke(runner, {"fail": True})
    assert result.errored
    error = json.loads(result.payload)
    assert error["errorType"] == "StepError"
    assert json.loads(error["errorMessage"]) == {"code": "Boom", "message": "it broke"}
    assert error["stackTrace"]
    assert not invoke(runner, {}).cold  # the environment survives a handled failure


def test_timeout_kills_the_environment(runner: LambdaRunner) -> None:
    invoke(runner, {})
    result = invoke(runner, {"sleep": 5}, timeout=1)
    assert result.errored
    assert json.loads(result.payload)["errorType"] == "Sandbox.Timedout"
    assert invoke(runner, {}, timeout=1).cold  # next invocation starts a fresh environment


def test_init_error_is_reported(runner: LambdaRunner) -> None:
    result = invoke(runner, {}, name="broken")
    assert result.errored
    error = json.loads(result.payload)
    assert error["errorType"] == "RuntimeError" and "bad config" in error["errorMessage"]


class _Clock:
    """time.time() that a test can move forward (the runner reads wall time to judge a session's remaining life)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def time(self) -> float:
        return time.time() + self.offset

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_workers_run_with_the_function_role_session_and_never_keep_an_expiring_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = _Clock()
    monkeypatch.setattr(lambda_runner, "time", clock)
    issued: list[Credentials] = []
    asked: list[tuple[str, str, float]] = []

    def session(name: str, role_arn: str, valid_for: float) -> Credentials:
        """Like ServiceCredentials.get: the cached session unless it expires within ``valid_for``."""
        asked.append((name, role_arn, valid_for))
        if not issued or issued[-1].expires_at - clock.time() <= valid_for:
            issued.append(Credentials(f"ASIA{len(issued)}", "secret", f"token-{len(issued)}", clock.time() + 3600))
        return issued[-1]

    code = tmp_path / "fn"
    code.mkdir()
    (code / "handler.py").write_text(HANDLER)
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 2, credentials=session)
    runner.register("fn", FunctionCode(code))
    role = "arn:aws:iam::123456789012:role/fn-role"

    def call() -> tuple[bool, dict]:
        inv = Invocation("fn", "arn:aws:lambda:us-east-1:123456789012:function:fn", "handler.handler", "python3.13",
                         10, 128, {"GREETING": "hi"}, "{}", role_arn=role)  # fmt: skip
        result = runner.invoke(inv)
        return result.cold, json.loads(result.payload)

    try:
        (cold1, first), (cold2, second) = call(), call()
        assert cold1 and not cold2 and first["pid"] == second["pid"]
        assert (first["key"], first["token"]) == ("ASIA0", "token-0")
        assert asked[0] == ("fn", role, 10 + CREDENTIAL_MARGIN_S)
        clock.offset = 3600 - 30  # the warm worker's session now ends before an invocation could
        cold3, third = call()
        assert cold3 and third["pid"] != first["pid"]
        assert (third["key"], third["token"]) == ("ASIA1", "token-1")
    finally:
        runner.shutdown()


def test_a_role_lambda_cannot_assume_fails_the_invocation(tmp_path: Path) -> None:
    def refuse(name: str, role_arn: str, valid_for: float) -> Credentials:
        raise PermissionError(f"the trust policy of {role_arn} does not let lambda.amazonaws.com assume it")

    code = tmp_path / "fn"
    code.mkdir()
    (code / "handler.py").write_text(HANDLER)
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", 1, credentials=refuse)
    runner.register("fn", FunctionCode(code))
    try:
        result = invoke(runner, {})
        assert result.errored
        error = json.loads(result.payload)
        assert error["errorType"] == "AccessDeniedException" and "cannot be assumed" in error["errorMessage"]
        assert runner.pids() == []
    finally:
        runner.shutdown()


def test_a_code_change_is_picked_up_by_the_next_invocation(runner: LambdaRunner, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:  # fmt: skip
    """Hot reload: editing the function's code retires its warm workers (logged); no `local down && up`."""
    layer = tmp_path / "layer"
    layer.mkdir()
    (layer / "shared.py").write_text("VALUE = 'one'\n")
    code = tmp_path / "reload"
    code.mkdir()
    (code / "handler.py").write_text("import os, shared\ndef handler(event, context):\n"
                                     "    return {'value': shared.VALUE, 'pid': os.getpid()}\n")  # fmt: skip
    runner.register("reload", FunctionCode(code, (layer,)))
    first, warm = invoke(runner, {}, name="reload"), invoke(runner, {}, name="reload")
    assert not warm.cold and json.loads(warm.payload) == json.loads(first.payload)

    caplog.set_level("INFO", logger="omnireel_local.lambda")
    (layer / "shared.py").write_text("VALUE = 'two, from the edited layer'\n")
    after_layer_edit = invoke(runner, {}, name="reload")
    assert after_layer_edit.cold
    assert json.loads(after_layer_edit.payload)["value"] == "two, from the edited layer"
    assert f"lambda reload: code changed ({layer / 'shared.py'})" in caplog.text

    (code / "handler.py").write_text("def handler(event, context):\n    return {'value': 'three'}\n")
    assert json.loads(invoke(runner, {}, name="reload").payload) == {"value": "three"}
    again = invoke(runner, {}, name="reload")
    assert not again.cold  # unchanged code: warm again


def test_every_log_line_carries_the_request_and_the_job(runner: LambdaRunner, tmp_path: Path) -> None:
    code = tmp_path / "chatty"
    code.mkdir()
    (code / "handler.py").write_text(
        "import json, sys\nprint('importing')\n"
        "def handler(event, context):\n"
        "    print('working on it')\n"
        "    print('to stderr', file=sys.stderr)\n"
        "    return {'body': json.dumps({'job_id': '0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a22'})}\n"
    )
    runner.register("chatty", FunctionCode(code))
    job = "0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a11"
    assert not invoke(runner, {"job_id": job}, name="chatty").errored  # the event names the job
    assert not invoke(runner, {"body": "{}"}, name="chatty").errored  # only the result does (POST /jobs)
    runner.shutdown()
    lines = (tmp_path / "logs" / "lambda-chatty.log").read_text().splitlines()
    fields = [line.split("\t", 3) for line in lines]
    assert all(len(f) == 4 and f[0].endswith("Z") and f[2].startswith("job=") for f in fields), lines
    assert [f[3] for f in fields if f[1] == "init"] == ["importing"]
    first = [f for f in fields if f[2] == f"job={job}"]
    second = [f for f in fields if f[2] == "job=0b6f1c1e-5a0e-4d55-9c3e-2f8f0f7d6a22"]
    for block in (first, second):
        texts = [f[3] for f in block]
        assert texts[0].startswith("START RequestId") and "working on it" in texts and "to stderr" in texts
        assert texts[-1].startswith("REPORT RequestId") and len({f[1] for f in block}) == 1


# ---------------------------------------------------------------- worker templates (lambda_zygote)
PROBE = """
import gc, os, sys, time
PRELOADED = "botocore.client" in sys.modules  # imported by the template, before this module
PATH0 = sys.path[0]


def handler(event, context):
    return {"pid": os.getpid(), "ppid": os.getppid(), "preloaded": PRELOADED, "cwd": os.getcwd(), "path0": PATH0,
            "leak": os.environ.get("OMNIREEL_TEST_LEAK"), "greeting": os.environ.get("GREETING"),
            "tz": time.tzname[0], "bytecode": sys.dont_write_bytecode, "argv0": sys.argv[0],
            "frozen": gc.get_freeze_count(), "thresholds": gc.get_threshold()}
"""


@pytest.fixture
def templated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(lambda_runner.TEMPLATE_SWITCH, "1")
    monkeypatch.setenv("OMNIREEL_TEST_LEAK", "the stack's own environment")  # never reaches a worker
    code = tmp_path / "probe"
    code.mkdir()
    (code / "handler.py").write_text(PROBE)
    runner = LambdaRunner("http://127.0.0.1:9", "us-east-1", tmp_path / "logs", max_workers_per_function=2)
    runner.register("probe", FunctionCode(code))
    yield runner, code
    runner.shutdown()


def _probe(runner: LambdaRunner, env: dict[str, str] | None = None) -> tuple[bool, dict]:
    result = invoke(runner, {}, name="probe", env=env or {"GREETING": "hi", "TZ": "Asia/Tokyo"})
    assert not result.errored, result.payload
    return result.cold, json.loads(result.payload)


def test_a_cold_start_forks_from_the_template_with_the_functions_own_environment(templated) -> None:
    runner, code = templated
    cold, first = _probe(runner)
    (template,) = runner.template_pids()
    assert cold and first["ppid"] == template and first["preloaded"]
    assert (first["cwd"], first["path0"]) == (str(code), str(code))  # as `python -m` in the function's folder
    assert first["leak"] is None and first["greeting"] == "hi"  # the function's environment, nothing of the stack's
    assert first["tz"] == "JST" and first["bytecode"] is True  # TZ re-read; PYTHONDONTWRITEBYTECODE as at startup
    assert first["argv0"] == "omnireel_local.lambda_worker"
    # the template's heap is frozen before it forks (omnireel_local/heap.py); the worker keeps CPython's thresholds
    assert first["frozen"] > 10_000 and first["thresholds"] == [2000, 10, 10]
    assert runner.pids() == [first["pid"]]
    changed = _probe(runner, {"GREETING": "bye", "TZ": "Asia/Tokyo"})[1]  # a new configuration: a new worker
    assert changed["greeting"] == "bye" and changed["pid"] != first["pid"] and changed["ppid"] == template


def test_workers_outlive_their_template_and_a_dead_template_is_replaced(templated) -> None:
    runner, _ = templated
    _, first = _probe(runner)
    (template,) = runner.template_pids()
    os.kill(template, signal.SIGKILL)
    warm_cold, warm = _probe(runner)
    assert not warm_cold and warm["pid"] == first["pid"]  # the running execution environment keeps serving
    deadline = time.monotonic() + 10
    while not _exited(template) and time.monotonic() < deadline:
        time.sleep(0.05)  # bounded: SIGKILL is delivered at once; the runner notices at the next cold start
    cold, fresh = _probe(runner, {"GREETING": "again"})
    assert cold and fresh["ppid"] != template and fresh["ppid"] in runner.template_pids()


def test_a_template_that_cannot_fork_falls_back_to_an_interpreter(templated, monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _ = templated

    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("the template did not fork: injected")

    monkeypatch.setattr(lambda_runner._Template, "fork", refuse)
    cold, answer = _probe(runner)
    assert cold and answer["ppid"] == os.getpid() and not answer["preloaded"]  # a new interpreter, started here
    assert runner.template_pids() == []  # templates are off for this runner from now on
    assert _probe(runner, {"GREETING": "later"})[1]["ppid"] == os.getpid()


def test_shutdown_stops_the_template_and_every_worker(templated) -> None:
    runner, _ = templated
    _, answer = _probe(runner)
    pids = [answer["pid"], *runner.template_pids()]
    runner.shutdown()
    deadline = time.monotonic() + 10
    while not all(_exited(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(_exited(pid) for pid in pids), pids


def _exited(pid: int) -> bool:
    """Gone, or a zombie waiting for its parent (the template's parent is this process: the runner reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_the_preloaded_modules_read_no_environment_at_import_but_what_the_template_is_keyed_on() -> None:
    """The rule behind IMPORT_TIME_ENV: every module the template imports (its preloads and what they import) is
    scanned for environment reads that run at import (module and class level, default arguments); each must be one
    the runner keys templates on, so no worker sees a value imported with another's environment."""
    reads = import_time_env_reads("omnireel_local.lambda_zygote:preload")
    assert reads, "the scan found no module-level read at all: it no longer sees them"
    assert set(reads) <= set(lambda_runner.IMPORT_TIME_ENV), reads


def test_a_slow_cold_start_holds_up_no_other_invocation(templated, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process is started outside the runner's lock: while one function's cold start waits (a template's first fork
    waits for its imports), a warm invocation of another function is served."""
    import threading

    runner, code = templated
    runner.register("other", FunctionCode(code))
    _probe(runner)  # "probe" is warm
    entered, release = threading.Event(), threading.Event()
    original = lambda_runner._Template.fork

    def slow_fork(self: object, *args: object, **kwargs: object) -> object:
        entered.set()
        release.wait(30)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(lambda_runner._Template, "fork", slow_fork)
    cold = threading.Thread(target=invoke, args=(runner, {}), kwargs={"name": "other"}, daemon=True)
    cold.start()
    try:
        assert entered.wait(10), "the cold start never reached the template"
        warm: list[tuple[bool, dict]] = []
        served = threading.Thread(target=lambda: warm.append(_probe(runner)), daemon=True)
        served.start()
        served.join(10)
        assert warm and warm[0][0] is False, "the warm invocation waited for another function's cold start"
    finally:
        release.set()
        cold.join(30)
    assert not cold.is_alive()
