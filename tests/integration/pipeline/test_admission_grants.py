"""Issue 34: admission's grants are conditional transactions. Many jobs take, wait for and release a small pool's slots
at once on threads (moto's DynamoDB with the local stack's per-request isolation, patch 26): no slot is ever granted
twice, the pool never holds more than its capacity, releases racing each other free a slot once, a grant whose answer is
refused is given back only once its job has ended (a timed-out wait's RecordExpired), never while the job runs on it
(the healer answered first), and at the end nothing leaks: no holder, nobody waiting, in_use 0.
"""

from __future__ import annotations

import random
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest
from moto import mock_aws

from omnireel.admission.gate import Gate, PoolConfig
from omnireel.core.clock import iso, now
from omnireel.jobs.job import Job, JobStatus
from omnireel.jobs.request import parse_job_request
from omnireel_local.patches.dynamodb import patch_dynamodb_atomic_requests
from omnireel_template import load_template

CAPACITY = 3


class FakeInstances:
    def count(self, endpoint: str) -> int:
        return CAPACITY


class Callbacks:
    """Task tokens as Step Functions keeps them: answered once; a dead one (its wait timed out) is refused."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.waiters: dict[str, threading.Event] = {}
        self.dead: set[str] = set()
        self.answered: list[str] = []

    def succeed(self, token: str, output: dict) -> bool:
        with self.lock:
            if token in self.dead or token in self.answered:
                return False
            self.answered.append(token)
        self.waiters[token].set()
        return True


@pytest.fixture
def stores(monkeypatch):
    with mock_aws():
        patch_dynamodb_atomic_requests(monkeypatch.setattr)
        from omnireel.aws import clients

        clients.client.cache_clear()
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        resources = load_template()["Resources"]
        for name, table in (("jobs", "JobsTable"), ("admission", "AdmissionTable")):
            spec = resources[table]["Properties"]
            extra = (
                {"GlobalSecondaryIndexes": spec["GlobalSecondaryIndexes"]} if "GlobalSecondaryIndexes" in spec else {}
            )
            ddb.create_table(
                TableName=name,
                AttributeDefinitions=spec["AttributeDefinitions"],
                KeySchema=spec["KeySchema"],
                BillingMode="PAY_PER_REQUEST",
                **extra,
            )
        from omnireel.aws.admission_store import AdmissionStore
        from omnireel.aws.job_store import JobStore

        yield JobStore("jobs"), AdmissionStore("admission")
        clients.client.cache_clear()


def _one_slot_gate(jobs, store, callbacks: Callbacks, **options) -> Gate:
    """A gate over one image instance with one slot (the image endpoint's default)."""
    return Gate(
        store=store,
        jobs=jobs,
        callbacks=callbacks,  # type: ignore[arg-type]
        pools={"image": PoolConfig("image-endpoint", 1)},
        instances=type("One", (), {"count": lambda self, endpoint: 1})(),  # type: ignore[arg-type]
        **options,
    )


def _job(jobs, owner: str) -> str:
    job_id = str(uuid.uuid4())
    stamp = iso(now())
    jobs.create(
        Job(
            job_id=job_id,
            status=JobStatus.ACCEPTED,
            request=parse_job_request({"prompt": "p"}),
            source="api",
            owner=owner,
            created_at=stamp,
            updated_at=stamp,
        )
    )
    return job_id


def test_concurrent_grants_and_releases_never_grant_a_slot_twice_and_leak_none(stores):
    jobs, store = stores
    callbacks = Callbacks()
    gate = Gate(
        store=store,
        jobs=jobs,
        callbacks=callbacks,  # type: ignore[arg-type]
        pools={"image": PoolConfig("image-endpoint", 1)},
        instances=FakeInstances(),  # type: ignore[arg-type]
    )
    gate.refresh("image")
    job_ids = [_job(jobs, f"caller-{i % 3}") for i in range(24)]
    holding: set[str] = set()
    served: list[str] = []
    peak = [0]
    lock = threading.Lock()
    abandoned: list[str] = []
    dead = set(random.Random(7).sample(job_ids, 4))  # their waits time out: a grant to them must come back

    def use_slot(job_id: str) -> None:
        with lock:
            assert job_id not in holding, f"{job_id} granted twice"
            holding.add(job_id)
            peak[0] = max(peak[0], len(holding))
            assert len(holding) <= CAPACITY
            served.append(job_id)
        threading.Event().wait(random.uniform(0, 0.01))  # the model call (a bounded pause, not a synchronisation)
        with lock:
            holding.discard(job_id)
        # two releases race (the stage's end and the terminal transition): the slot is freed once
        with ThreadPoolExecutor(2) as pool:
            freed = list(pool.map(lambda _: gate.store.release("image", job_id), range(2)))
        assert sorted(freed) == [False, True]
        gate.dispatch("image")

    def run(job_id: str) -> None:
        if gate.acquire(job_id, "image"):
            use_slot(job_id)
            return
        token = str(uuid.uuid4())
        callbacks.waiters[token] = threading.Event()
        if job_id in dead:
            callbacks.dead.add(token)
        gate.wait(job_id, "image", token)
        if job_id in dead:
            # its wait times out: the execution's RecordExpired ends the job and leave() frees what it holds, whether
            # a dispatcher granted it a slot before (its answer refused: the slot stays until here) or not
            threading.Event().wait(random.uniform(0, 0.01))  # the timeout's moment (bounded; not a synchronisation)
            gate.leave(jobs.transition(job_id, JobStatus.EXPIRED))
            with lock:
                abandoned.append(job_id)
            return
        assert callbacks.waiters[token].wait(60), f"{job_id} never granted"
        use_slot(job_id)

    with ThreadPoolExecutor(12) as pool:
        for future in [pool.submit(run, job_id) for job_id in job_ids]:
            future.result()
    gate.dispatch("image")

    pool_item = store.pool("image")
    assert pool_item is not None
    assert (pool_item.in_use, pool_item.waiting, store.holders("image"), store.entries("image")) == (0, 0, [], [])
    alive = [job_id for job_id in job_ids if job_id not in abandoned]
    assert sorted(served) == sorted(alive) and len(served) == len(set(served))
    assert 1 <= peak[0] <= CAPACITY


def test_a_recount_never_writes_a_stale_queue_over_a_grant_and_an_enqueue(stores):
    """The healing schedule re-derives the pool's counts from its items, conditioned on the pool not having changed
    since it read it. A release, a grant and an enqueue in between bring in_use and waiting back to the values read
    (A's slot freed and granted to A's next job while B's first job arrives): the recount must still be refused, or
    its stale per-caller map drops B from the round-robin until the next repair."""
    jobs, store = stores
    callbacks = Callbacks()
    gate = _one_slot_gate(jobs, store, callbacks)
    gate.refresh("image")
    a1, a2, b1 = _job(jobs, "caller-a"), _job(jobs, "caller-a"), _job(jobs, "caller-b")
    assert gate.acquire(a1, "image")
    for job_id in (a2,):
        token = f"token-{job_id}"
        callbacks.waiters[token] = threading.Event()
        gate.wait(job_id, "image", token)
    snapshot = store.pool("image")
    entries = store.entries("image")
    assert (snapshot.in_use, snapshot.waiting) == (1, 1)
    # meanwhile: A1's slot is freed and granted to A2, and B's job starts waiting
    gate.release(a1, "image")
    token = f"token-{b1}"
    callbacks.waiters[token] = threading.Event()
    gate.wait(b1, "image", token)
    now_pool = store.pool("image")
    assert (now_pool.in_use, now_pool.waiting) == (1, 1)  # the counts the healer read, again
    stale_queued = {e.caller_key: 1 for e in entries}  # what the healer derived from the items it read
    assert not store.recount(snapshot, in_use=1, waiting=1, queued=stale_queued, served=snapshot.served)
    after = store.pool("image")
    assert len(after.callers_waiting()) == 1 and after.queued == now_pool.queued  # B still in the round-robin


def test_a_job_granted_while_it_parks_still_gets_its_one_job_queued_event(stores):
    """A job whose status became ``queued`` gets its job.queued event even when a release's dispatch grants it a slot
    between its enqueue and the event (another Lambda's dispatch, here run inside the enqueue): consumers saw the
    status and its stage time, so the event says so too, once, with nobody ahead. Before the fix the wait returned
    "granted" first and the event was never sent (an intermittent failure of the pipeline test
    test_a_waiting_job_gets_one_job_queued_event)."""
    jobs, store = stores
    callbacks = Callbacks()
    gate = _one_slot_gate(jobs, store, callbacks)
    gate.refresh("image")
    holder, waiting = _job(jobs, "caller-a"), _job(jobs, "caller-b")
    assert gate.acquire(holder, "image")
    enqueue = store.enqueue

    def enqueue_then_the_holder_releases(entry):  # the release races the wait's next lines
        added = enqueue(entry)
        gate.release(holder, "image")
        return added

    store.enqueue = enqueue_then_the_holder_releases  # type: ignore[method-assign]
    published: list = []
    publisher = type("Publisher", (), {"publish": lambda self, event: published.append(event)})()
    token = f"token-{waiting}"
    callbacks.waiters[token] = threading.Event()
    assert gate.wait(waiting, "image", token, publisher=publisher) == "granted"
    assert callbacks.waiters[token].is_set() and store.holds("image", waiting)
    assert [(e.event_type, e.job_id, e.queue.position) for e in published] == [("job.queued", waiting, 0)]
    assert jobs.get(waiting).queued_published_at  # once: a retried wait does not send it again


class _Running:
    """Every execution runs (the jobs' executions wait in their WaitFor<Kind>Slot states)."""

    def running(self, name: str | None) -> bool:
        return True


def _a_holder_and_a_waiting_job(jobs, store, callbacks: Callbacks, **options) -> tuple[Gate, str, str, str]:
    """A one-slot gate whose slot caller A's job holds while caller B's job waits for it: (gate, A's job, B's job,
    B's task token)."""
    gate = _one_slot_gate(jobs, store, callbacks, **options)
    gate.refresh("image")
    holder, waiting = _job(jobs, "caller-a"), _job(jobs, "caller-b")
    assert gate.acquire(holder, "image")
    token = f"token-{waiting}"
    callbacks.waiters[token] = threading.Event()
    assert gate.wait(waiting, "image", token) == "queued"
    return gate, holder, waiting, token


def test_a_grant_whose_answer_was_lost_is_answered_again_by_the_healer(stores):
    """The dispatcher (a release's Lambda) died between its grant and SendTaskSuccess: the job holds the slot while its
    execution still waits, until its queue limit (an hour by default), and every other job waits behind it (found by
    the fault suite's lambda_crash phase: a GenerateImage crash 0.15 s in, after its release's dispatch had granted
    the next job). The healer answers the grant's token again once the grant is older than its grace; a token
    answered already is refused by Step Functions, so a job that moved on is left alone, and nothing resumes twice."""
    jobs, store = stores
    callbacks = Callbacks()
    gate, holder, waiting, token = _a_holder_and_a_waiting_job(jobs, store, callbacks, grace_s=0)
    # the holder's release frees the slot and its dispatch grants it to the waiting job, then the process dies
    assert store.release("image", holder)
    (entry,) = store.entries("image")
    assert store.grant(entry, iso(now()))
    assert not callbacks.waiters[token].is_set()

    report = gate.heal(workflow=_Running())  # type: ignore[arg-type]
    assert report["image"]["resumed"] == 1 and report["image"]["released"] == 0
    assert callbacks.waiters[token].is_set() and store.holds("image", waiting)
    assert callbacks.answered == [token]
    assert gate.heal(workflow=_Running())["image"]["resumed"] == 0  # type: ignore[arg-type]
    assert callbacks.answered == [token]  # answered once


def test_a_free_slot_left_by_a_release_whose_dispatch_never_ran_goes_to_the_waiting_job(stores):
    """The release's Lambda died between its release and its dispatch: a slot is free and a job waits. The healer's
    run sees both in the pool it read and dispatches."""
    jobs, store = stores
    callbacks = Callbacks()
    gate, holder, waiting, token = _a_holder_and_a_waiting_job(jobs, store, callbacks)
    assert store.release("image", holder)  # and no dispatch
    assert not callbacks.waiters[token].is_set()

    report = gate.heal(workflow=_Running())  # type: ignore[arg-type]
    assert report["image"]["granted"] == 1 and report["image"]["released"] == 0
    assert callbacks.answered == [token] and store.holds("image", waiting)


def test_a_grant_the_healer_answered_first_is_not_given_back_by_its_slow_dispatcher(stores):
    """The healer takes a grant for lost (older than its grace, the job still waiting) while its dispatcher is only
    slow, and answers the token first; the dispatcher's own SendTaskSuccess is then refused. The job runs on the grant,
    so the dispatcher must keep it: giving the slot back granted it to the next job too, two jobs calling the model on
    one slot (the integration pipeline's admission-faults test saw the healer resume two jobs, one of them this way)."""
    jobs, store = stores
    a, b, c = _job(jobs, "caller-a"), _job(jobs, "caller-b"), _job(jobs, "caller-c")
    raced: list[str] = []

    class HealerFirst(Callbacks):
        def succeed(self, token: str, output: dict) -> bool:
            if token == f"token-{b}" and not raced:
                raced.append(token)  # between the grant and this answer, the healer runs (grace 0: the grant is "old")
                assert gate.heal(workflow=_Running())["image"]["resumed"] == 1  # type: ignore[arg-type]
            return super().succeed(token, output)

    callbacks = HealerFirst()
    gate = _one_slot_gate(jobs, store, callbacks, grace_s=0)
    gate.refresh("image")
    assert gate.acquire(a, "image")
    for job_id in (b, c):
        callbacks.waiters[f"token-{job_id}"] = threading.Event()
        assert gate.wait(job_id, "image", f"token-{job_id}") == "queued"
    assert gate.release(a, "image")  # its dispatch grants B, and the healer answers B's token before it does
    assert raced and callbacks.answered == [f"token-{b}"]
    assert store.holds("image", b), "B runs on its grant: its slot must stay held"
    assert not store.holds("image", c) and not callbacks.waiters[f"token-{c}"].is_set(), "C granted B's slot too"
    pool = store.pool("image")
    assert pool is not None and (pool.in_use, pool.waiting) == (1, 1)


def test_a_refused_answer_gives_the_slot_back_once_the_job_has_ended(stores):
    """The other refusal: B's wait is over and B has ended (its wait timed out, RecordExpired ran between the grant and
    the answer). The dispatcher gives the slot back and grants it to C."""
    jobs, store = stores
    a, b, c = _job(jobs, "caller-a"), _job(jobs, "caller-b"), _job(jobs, "caller-c")
    callbacks = Callbacks()
    gate = _one_slot_gate(jobs, store, callbacks)
    gate.refresh("image")
    assert gate.acquire(a, "image")
    for job_id in (b, c):
        callbacks.waiters[f"token-{job_id}"] = threading.Event()
        assert gate.wait(job_id, "image", f"token-{job_id}") == "queued"
    callbacks.dead.add(f"token-{b}")
    jobs.transition(b, JobStatus.EXPIRED)  # ended without leaving the queue yet (its leave() is still to come)
    assert gate.release(a, "image")
    assert not store.holds("image", b) and store.holds("image", c)
    assert callbacks.answered == [f"token-{c}"]


def test_a_grant_the_wait_took_at_once_keeps_its_token_for_the_healer(stores):
    """The wait's own take of a free slot (nobody waiting, a slot freed since the stage's fast path was refused) also
    answers a token: the holder keeps it, so a crash between the take and the answer is healed the same way."""
    jobs, store = stores
    callbacks = Callbacks()
    gate = _one_slot_gate(jobs, store, callbacks, grace_s=0)
    gate.refresh("image")
    job_id = _job(jobs, "caller-a")
    token = f"token-{job_id}"
    callbacks.waiters[token] = threading.Event()
    assert gate.wait(job_id, "image", token) == "granted"
    (held,) = store.holders("image")
    assert held.task_token == token


def test_a_release_and_a_grant_around_the_healer_s_reads_never_undercount_the_slots(stores):
    """The healer counts a pool's slots from its items and writes the counts only if the pool is as it read it. A
    release just before its holders' read and a fast-path grant just after leave the pool's counts as read, so the
    condition holds while the read missed the new holder: counted from that read, in_use went 1 -> 0 with a job on the
    slot, and the next job got the slot too (a clean-clone CI run saw two image calls at once in
    test_admission_faults). A recount reads the pool and the items again right before its write."""
    from omnireel.aws.admission_store import POOL_SK, pool_pk

    jobs, store = stores
    gate = _one_slot_gate(jobs, store, Callbacks(), grace_s=3600)
    gate.refresh("image")
    first, second, third = _job(jobs, "caller-a"), _job(jobs, "caller-b"), _job(jobs, "caller-c")
    assert gate.acquire(first, "image")
    # A turn older than the healer's memory in the pool's map: the counts disagree with the items, so the run recounts.
    store._ddb.update_item(
        TableName=store._name, Key=store._key(pool_pk("image"), POOL_SK),
        UpdateExpression="SET served.#c = :t", ExpressionAttributeNames={"#c": "caller-z"},
        ExpressionAttributeValues={":t": {"S": "2000-01-01T00:00:00.000Z"}},
    )  # fmt: skip
    holders, raced = store.holders, []

    def holders_around_a_release_and_a_grant(kind):
        if raced:
            return holders(kind)
        raced.append(kind)
        assert store.release("image", first)  # just before the read
        read = holders(kind)
        assert gate.acquire(second, "image")  # just after it: the fast path (nobody waits)
        return read

    store.holders = holders_around_a_release_and_a_grant
    gate.heal(workflow=_Running())  # type: ignore[arg-type]
    store.holders = holders
    assert raced
    assert store.pool("image").in_use == 1 and [h.job_id for h in store.holders("image")] == [second]
    assert not gate.acquire(third, "image"), "the slot second holds was granted again"
