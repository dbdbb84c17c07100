"""Capacity and cost model of the two GPU endpoints, checked by a discrete-event queueing simulation.

    .venv-dev/bin/python bench/capacity.py [--quick] [--out docs/capacity.md|-]

Model: Poisson job arrivals; each job holds one image instance (real-time, ml.g6.xlarge) for the image time and
then one video instance (async, ml.g6e.xlarge, MaxConcurrentInvocationsPerInstance=1) for the video time; each
instance serves one request at a time, first come first served. Instances needed per arrival rate come from the
M/M/c (Erlang C) formula (conservative: it assumes exponential service); the simulation runs the same queue both
with exponential service (to check the simulator against the formula) and with near-constant service (lognormal,
CV 0.1 - diffusion steps take a fixed time), which is what the waits in the table use. A second simulation models
scale-to-zero of the async video endpoint (provisioning delay, idle timeout) for the billed instance time.

Everything is seeded and bounded (a fixed number of simulated jobs per case): about 10 s on 2 cores.
"""

from __future__ import annotations

import argparse
import heapq
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "layers" / "omnireel"))

from bench.report import machine, table, today, write_section  # noqa: E402
from omnireel.usage.prices import PRICES_AS_OF, price_per_hour  # noqa: E402  (the one price table)

# ---------------------------------------------------------------------------------- inputs (all overridable)
IMAGE_MODEL_S = 4.7  # warm FLUX.2-klein 1024x1024, ml.g6.xlarge (AWS sample's run)
VIDEO_MODEL_S = 8.9  # Wan2.1-VACE 480x320, 17 frames, 30 steps, ml.g6e.xlarge (AWS sample's run)
IMAGE_HOLD_OVERHEAD_S = 0.1  # assumed: real-time invocation overhead + PNG/base64 encode in the container
VIDEO_HOLD_OVERHEAD_S = 0.5  # assumed: async wrapper fetches the ~47 KB request from S3, writes the MP4, notifies
# The price table a job's usage estimate reads too (layers/omnireel/omnireel/usage/prices.py: source and date there).
PRICE_IMAGE_PER_H = price_per_hour("ml.g6.xlarge") or 0.0
PRICE_VIDEO_PER_H = price_per_hour("ml.g6e.xlarge") or 0.0
PROVISION_S = 520.0  # the sample's video endpoint reached InService in 8 min 40 s; scale-out from 0 is of that order
ALARM_DELAY_S = 120.0  # HasBacklogWithoutCapacity alarm (60 s period) + step-scaling reaction
IDLE_TIMEOUT_S = 900.0  # target-tracking scale-in needs ~15 min of empty backlog before 1 -> 0
BATCH_JOBS = 10_000
BATCH_IN_FLIGHT = 10  # template.yaml BatchMaxInFlightJobs default (tests/unit/bench checks they agree)
BATCH_OVERHEAD_S = 1.0  # assumed: staging + Step Functions + SNS callback between the pools ("0.5-1 s", above)
MAX_MEAN_WAIT = 0.5  # instances are sized so that the M/M/c mean wait is at most half a service time


# ---------------------------------------------------------------------------------- closed forms
def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in M/M/c with ``offered`` = lambda * S Erlangs (Erlang C)."""
    if offered <= 0:
        return 0.0
    if offered >= servers:
        return 1.0
    blocking = 1.0  # Erlang B by the stable recursion B(k) = a B(k-1) / (k + a B(k-1))
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    rho = offered / servers
    return blocking / (1 - rho * (1 - blocking))


def mmc_mean_wait(rate: float, service: float, servers: int) -> float:
    """Mean queue wait Wq of M/M/c (same time unit as ``service``; ``rate`` per that unit)."""
    offered = rate * service
    if offered >= servers:
        return math.inf
    return erlang_c(servers, offered) * service / (servers - offered)


def mmc_wait_quantile(rate: float, service: float, servers: int, q: float) -> float:
    """Quantile of the M/M/c queue wait: P(W > t) = C exp(-(c mu - lambda) t)."""
    offered = rate * service
    if offered >= servers:
        return math.inf
    prob_wait = erlang_c(servers, offered)
    if prob_wait <= 1 - q:
        return 0.0
    return math.log(prob_wait / (1 - q)) * service / (servers - offered)


def servers_needed(rate: float, service: float, max_mean_wait: float = MAX_MEAN_WAIT) -> int:
    """Fewest instances whose M/M/c mean wait is at most ``max_mean_wait`` service times (conservative:
    near-constant service waits about half as long as exponential service)."""
    servers = max(1, math.ceil(rate * service))
    while mmc_mean_wait(rate, service, servers) > max_mean_wait * service:
        servers += 1
    return servers


# ---------------------------------------------------------------------------------- simulations
@dataclass(frozen=True)
class QueueResult:
    waits: np.ndarray  # seconds, per job in arrival order
    utilization: float  # busy instance-seconds / (servers * horizon)

    @property
    def mean_wait(self) -> float:
        return float(self.waits.mean())

    def wait_quantile(self, q: float) -> float:
        return float(np.quantile(self.waits, q))


def simulate_queue(
    rate: float, service: Callable[[np.random.Generator, int], np.ndarray], servers: int, jobs: int, seed: int
) -> QueueResult:
    """FCFS M/G/c: Poisson arrivals (``rate`` per second), ``servers`` identical instances, seeded.

    Exact event order for FCFS: each arrival takes the instance that frees up first.
    The first 5 % of jobs are dropped as warm-up (the queue starts empty).
    """
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, jobs))
    services = service(rng, jobs)
    free_at = [0.0] * servers
    waits = np.empty(jobs)
    for i in range(jobs):
        earliest = heapq.heappop(free_at)
        start = max(arrivals[i], earliest)
        waits[i] = start - arrivals[i]
        heapq.heappush(free_at, start + services[i])
    warm = jobs // 20
    horizon = max(max(free_at), arrivals[-1])
    return QueueResult(waits=waits[warm:], utilization=float(services.sum() / (servers * horizon)))


def exponential(mean: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.exponential(mean, n)


def near_constant(mean: float, cv: float = 0.1) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Lognormal service times with the given mean and coefficient of variation."""
    sigma = math.sqrt(math.log(1 + cv * cv))
    mu = math.log(mean) - sigma * sigma / 2
    return lambda rng, n: rng.lognormal(mu, sigma, n)


@dataclass(frozen=True)
class ScaleToZeroResult:
    billed_fraction: float  # billed instance time / wall time
    mean_wait: float
    p95_wait: float
    cold_fraction: float  # jobs that found the endpoint at zero instances


def simulate_scale_to_zero(
    rate: float,
    service: float,
    jobs: int,
    seed: int,
    provision: float = PROVISION_S,
    alarm_delay: float = ALARM_DELAY_S,
    idle_timeout: float = IDLE_TIMEOUT_S,
) -> ScaleToZeroResult:
    """One async instance (MinCapacity 0, max 1) that launches on backlog and stops after ``idle_timeout`` idle.

    A job arriving at zero instances waits for the alarm and the provisioning (billed from launch, a
    conservative assumption); jobs queue FCFS on the single instance.
    """
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, jobs))
    services = near_constant(service)(rng, jobs)
    billed = 0.0
    launched_at = None  # launch time of the current instance, None when at zero
    free_at = 0.0
    waits = np.empty(jobs)
    cold = 0
    for i, t in enumerate(arrivals):
        if launched_at is not None and t > free_at + idle_timeout:  # scaled in while idle
            billed += free_at + idle_timeout - launched_at
            launched_at = None
        if launched_at is None:
            cold += 1
            launched_at = t + alarm_delay
            free_at = launched_at + provision
        start = max(t, free_at)
        waits[i] = start - t
        free_at = start + services[i]
    billed += free_at + idle_timeout - launched_at
    horizon = free_at + idle_timeout
    return ScaleToZeroResult(
        billed_fraction=billed / horizon,
        mean_wait=float(waits.mean()),
        p95_wait=float(np.quantile(waits, 0.95)),
        cold_fraction=cold / jobs,
    )


@dataclass(frozen=True)
class BatchResult:
    makespan: float  # first job started -> last job done
    image_busy_s: float
    video_billed_s: float  # instance-seconds from each video instance's launch to its scale-in after the batch
    max_in_flight: int


def simulate_batch(
    jobs: int,
    in_flight: int,
    image_servers: int,
    image_s: float,
    video_servers: int,
    video_s: float,
    *,
    overhead_s: float,
    video_ready_at: list[float],
    seed: int,
    idle_timeout: float = IDLE_TIMEOUT_S,
    provision: float = PROVISION_S,
) -> BatchResult:
    """A batch of ``jobs`` submitted at t=0 with at most ``in_flight`` jobs running (BatchMaxInFlightJobs).

    A job takes a slot, queues FCFS for an image instance, spends ``overhead_s`` in orchestration (staging, Step
    Functions, callbacks: no GPU held), queues FCFS for a video instance (instance i exists from
    ``video_ready_at[i]``: 0 when the endpoint is warm, alarm + provisioning when it scales up from zero) and frees its
    slot when the video is done. Near-constant service (CV 0.1). Seeded and bounded by ``jobs``.
    """
    rng = np.random.default_rng(seed)
    img = near_constant(image_s)(rng, jobs)
    vid = near_constant(video_s)(rng, jobs)
    image_free = [0.0] * image_servers
    video_free = sorted(video_ready_at[:video_servers])
    slots = [0.0] * in_flight  # when each slot frees up
    done_at = 0.0
    # Jobs go through the stages in submission order, and both pools are FCFS, so one pass in order is exact.
    for i in range(jobs):
        start = heapq.heappop(slots)
        image_start = max(start, heapq.heappop(image_free))
        heapq.heappush(image_free, image_start + img[i])
        ready = image_start + img[i] + overhead_s
        video_start = max(ready, heapq.heappop(video_free))
        finish = video_start + vid[i]
        heapq.heappush(video_free, finish)
        heapq.heappush(slots, finish)
        done_at = max(done_at, finish)
    # Billed from launch (a cold instance launches ``provision`` s before it is in service) to scale-in after the batch.
    billed = sum(done_at + idle_timeout - max(0.0, ready - provision) for ready in video_ready_at[:video_servers])
    return BatchResult(done_at, float(img.sum()), billed, in_flight)


# ---------------------------------------------------------------------------------- report
def _fmt_s(seconds: float) -> str:
    if math.isinf(seconds):
        return "unbounded"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min"


def build_report(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    s_img = args.image_s + IMAGE_HOLD_OVERHEAD_S
    s_vid = args.video_s + VIDEO_HOLD_OVERHEAD_S
    rates_h = [float(r) for r in args.rates.split(",")]
    jobs = args.jobs

    # 1) Simulator check against the closed form (exponential service, where Erlang C is exact).
    check_rows = []
    for servers, rho in ((1, 0.5), (2, 0.8), (5, 0.9), (20, 0.85)):
        rate = rho * servers / s_vid
        sim = simulate_queue(rate, exponential(s_vid), servers, jobs, seed=servers)
        formula = mmc_mean_wait(rate, s_vid, servers)
        check_rows.append(
            [
                servers,
                f"{rho:.2f}",
                f"{formula:.2f}",
                f"{sim.mean_wait:.2f}",
                f"{sim.mean_wait / formula - 1:+.1%}",
                f"{mmc_wait_quantile(rate, s_vid, servers, 0.95):.1f}",
                f"{sim.wait_quantile(0.95):.1f}",
                f"{erlang_c(servers, rate * s_vid):.3f}",
                f"{float((sim.waits > 0).mean()):.3f}",
            ]
        )

    # 2) Instances, waits and cost per arrival rate (always-on, sized per rate).
    rows = []
    for i, rate_h in enumerate(rates_h):
        rate = rate_h / 3600
        c_img, c_vid = servers_needed(rate, s_img), servers_needed(rate, s_vid)
        sim_img = simulate_queue(rate, near_constant(s_img), c_img, jobs, seed=100 + i)
        sim_vid = simulate_queue(rate, near_constant(s_vid), c_vid, jobs, seed=200 + i)
        per_hour = c_img * args.price_image + c_vid * args.price_video
        rows.append(
            [
                f"{rate_h:,.0f}",
                f"{c_img} ({rate * s_img / c_img:.0%})",
                f"{c_vid} ({rate * s_vid / c_vid:.0%})",
                f"{_fmt_s(sim_img.mean_wait)} / {_fmt_s(sim_img.wait_quantile(0.95))}",
                f"{_fmt_s(sim_vid.mean_wait)} / {_fmt_s(sim_vid.wait_quantile(0.95))}",
                _fmt_s(mmc_mean_wait(rate, s_vid, c_vid)),
                f"${per_hour:,.2f}",
                f"${per_hour / rate_h * 1000:,.2f}",
            ]
        )
    floor = (s_img * args.price_image + s_vid * args.price_video) / 3600 * 1000

    # 3) Scale-to-zero of the async video endpoint (image endpoint stays at 1 instance).
    stz_rows = []
    for i, rate_h in enumerate(r for r in rates_h if r <= 100):
        rate = rate_h / 3600
        stz_jobs = max(200, min(jobs // 10, int(rate_h * 24 * 30)))  # about a month of jobs, bounded
        res = simulate_scale_to_zero(rate, s_vid, stz_jobs, seed=300 + i)
        on_cost = args.price_video
        stz_cost = res.billed_fraction * args.price_video
        per_1000_on = (args.price_image + on_cost) / rate_h * 1000
        per_1000_stz = (args.price_image + stz_cost) / rate_h * 1000
        stz_rows.append(
            [
                f"{rate_h:,.0f}",
                f"{res.billed_fraction:.0%}",
                f"{res.cold_fraction:.0%}",
                f"{_fmt_s(res.mean_wait)} / {_fmt_s(res.p95_wait)}",
                f"${on_cost * 24 * 30:,.0f} -> ${stz_cost * 24 * 30:,.0f}",
                f"${per_1000_on:,.2f} -> ${per_1000_stz:,.2f}",
            ]
        )

    # 4) Ceiling of today's template (1 instance each, no autoscaling).
    ceiling_img, ceiling_vid = 3600 / s_img, 3600 / s_vid
    today_h = args.today
    mult_rows = []
    for mult in (10, 100, 1000):
        rate_h = today_h * mult
        rate = rate_h / 3600
        rho_img, rho_vid = rate * s_img, rate * s_vid
        mult_rows.append(
            [
                f"{mult:,}x",
                f"{rate_h:,.0f}",
                f"{rho_img:.0%}",
                f"{rho_vid:.0%}",
                f"{servers_needed(rate, s_img)} / {servers_needed(rate, s_vid)}",
                f"{rate_h / 3600:.2f}",
            ]
        )

    inputs = table(
        ["input", "value", "source"],
        [
            [
                "image time per job",
                f"{args.image_s} s + {IMAGE_HOLD_OVERHEAD_S} s = {s_img:.1f} s",
                "AWS sample (warm FLUX.2-klein, ml.g6.xlarge); overhead assumed",
            ],
            [
                "video time per job",
                f"{args.video_s} s + {VIDEO_HOLD_OVERHEAD_S} s = {s_vid:.1f} s",
                "AWS sample (Wan2.1-VACE, 17 frames, 30 steps, ml.g6e.xlarge); overhead assumed",
            ],
            [
                "ml.g6.xlarge",
                f"${args.price_image:.2f}/h",
                f"approx. us-east-1 on-demand hosting ({PRICES_AS_OF}; omnireel/usage/prices.py); **check**",
            ],
            [
                "ml.g6e.xlarge",
                f"${args.price_video:.2f}/h",
                f"approx. us-east-1 on-demand hosting ({PRICES_AS_OF}; omnireel/usage/prices.py); **check**",
            ],
            [
                "instances per endpoint",
                f"fewest c with M/M/c mean wait <= {MAX_MEAN_WAIT:g} x service time",
                "sizing rule of this model",
            ],
            [
                "scale-from-zero",
                f"alarm {ALARM_DELAY_S:.0f} s + provisioning {PROVISION_S:.0f} s",
                "sample's InService time",
            ],
            ["scale-to-zero", f"after {IDLE_TIMEOUT_S / 60:.0f} min without backlog", "target-tracking scale-in"],
        ],
    )
    check = table(
        [
            "c",
            "utilization",
            "Wq formula s",
            "Wq sim s",
            "diff",
            "p95 formula s",
            "p95 sim s",
            "P(wait) formula",
            "P(wait) sim",
        ],
        check_rows,
    )
    # 5) A 10,000-prompt batch at the default pools (template defaults) and with larger pools.
    batch_rows = []
    cold1 = ALARM_DELAY_S + PROVISION_S
    cold2 = cold1 + ALARM_DELAY_S + PROVISION_S  # the second instance: the backlog alarm again, then provisioning
    scenarios = [
        ("defaults, video warm (2 instances)", 1, [0.0, 0.0], BATCH_IN_FLIGHT),
        ("defaults, video scaled to zero", 1, [cold1, cold2], BATCH_IN_FLIGHT),
        ("image 2, video 4 (warm), in flight 20", 2, [0.0] * 4, 20),
        ("image 4, video 8 (warm), in flight 40", 4, [0.0] * 8, 40),
    ]
    for n, (label, c_img_b, ready, k) in enumerate(scenarios):
        result = simulate_batch(
            BATCH_JOBS, k, c_img_b, s_img, len(ready), s_vid, overhead_s=BATCH_OVERHEAD_S, video_ready_at=ready,
            seed=500 + n,
        )  # fmt: skip
        cost = c_img_b * result.makespan / 3600 * args.price_image + result.video_billed_s / 3600 * args.price_video
        batch_rows.append(
            [
                label,
                f"{c_img_b} / {len(ready)} / {k}",
                _fmt_s(result.makespan) if result.makespan < 7200 else f"{result.makespan / 3600:.1f} h",
                f"{BATCH_JOBS / result.makespan * 3600:,.0f}",
                f"${cost:,.0f}",
                f"${cost / BATCH_JOBS * 1000:,.2f}",
            ]
        )
    batch_table = table(
        ["pools", "image / video / in flight", "time", "jobs/hour", "GPU cost", "$ per 1,000 videos"], batch_rows
    )
    worst_image_wait = (BATCH_IN_FLIGHT - 1) * s_img

    always_on = table(
        [
            "jobs/hour",
            "image instances (util.)",
            "video instances (util.)",
            "image wait mean / p95",
            "video wait mean / p95",
            "video Wq M/M/c",
            "GPU $/hour",
            "$ per 1,000 videos",
        ],
        rows,
    )
    stz = table(
        [
            "jobs/hour",
            "video instance billed",
            "jobs finding 0 instances",
            "video wait mean / p95",
            "video $/month",
            "$ per 1,000 videos (always-on -> scale-to-zero)",
        ],
        stz_rows,
    )
    mult = table(
        [
            "load",
            "jobs/hour",
            "image util. (1 instance)",
            "video util. (1 instance)",
            "instances needed image / video",
            "jobs/second",
        ],
        mult_rows,
    )
    return f"""<!-- bench:capacity -->
Generated by `.venv-dev/bin/python bench/capacity.py{" --quick" if args.quick else ""}` on {today()} ({machine()}),
{jobs:,} simulated jobs per case, run time {time.perf_counter() - started:.1f} s.

### Inputs

{inputs}

### Simulator check (exponential service, video endpoint's {s_vid:.1f} s mean, {jobs:,} jobs)

{check}

### Always-on, sized per arrival rate (near-constant service, CV 0.1)

Waits are the simulated queue waits before the model starts (mean / p95). Cost counts the GPU instances only.

{always_on}

Lower bound (every GPU second busy): ${floor:.2f} per 1,000 videos.

### Scale-to-zero of the async video endpoint (image endpoint always on, 1 instance)

{stz}

### Today's template under more load (today assumed {today_h:g} jobs/hour)

Single-instance ceilings: image {ceiling_img:,.0f} jobs/hour, video {ceiling_vid:,.0f} jobs/hour (utilization 100 %).

{mult}

### A 10,000-prompt batch (BatchMaxInFlightJobs, default {BATCH_IN_FLIGHT})

{BATCH_JOBS:,} jobs submitted at once, at most "in flight" running (a slot per job from start to video done),
{BATCH_OVERHEAD_S:g} s of orchestration per job between the pools (no GPU held). The image endpoint is always on
(billed for the batch's duration); video instances are billed from launch to scale-in {IDLE_TIMEOUT_S / 60:.0f} min
after the batch. With the default bound a job waits at most about {worst_image_wait:.0f} s for the image instance,
inside the real-time endpoint's 60 s invocation timeout; raising the bound without the image pool only lengthens that
queue (and past ~12 per image instance, times requests out), it does not speed the batch.

{batch_table}
<!-- /bench:capacity -->"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="20,000 jobs per case; no write unless --out")
    parser.add_argument("--jobs", type=int, default=None, help="simulated jobs per case (default 200,000)")
    parser.add_argument("--rates", default="1,10,100,1000,10000", help="jobs per hour")
    parser.add_argument("--today", type=float, default=10.0, help="today's load, jobs per hour (assumption)")
    parser.add_argument("--image-s", type=float, default=IMAGE_MODEL_S)
    parser.add_argument("--video-s", type=float, default=VIDEO_MODEL_S)
    parser.add_argument("--price-image", type=float, default=PRICE_IMAGE_PER_H)
    parser.add_argument("--price-video", type=float, default=PRICE_VIDEO_PER_H)
    parser.add_argument("--out", default=None, help="file whose 'capacity' section is replaced; '-' prints")
    args = parser.parse_args()
    args.jobs = args.jobs or (20_000 if args.quick else 200_000)
    out = args.out if args.out is not None else ("-" if args.quick else str(REPO / "docs" / "capacity.md"))
    text = build_report(args)
    body = text.split("\n", 1)[1].rsplit("\n", 1)[0]  # without the markers
    print(body)
    if out != "-":
        write_section("capacity", body, Path(out))
        print(f"\n(wrote section 'capacity' of {out})")


if __name__ == "__main__":
    main()
