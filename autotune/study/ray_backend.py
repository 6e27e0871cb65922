"""``--backend ray``: the trials run on a Ray cluster, the driver stays here.

This process is still the one that asks and tells Optuna and writes the database (``driver._run``
with ``Slots``): each slot is a thread of it that hands its trial to one long-lived Ray actor and
relays the trial's evaluations back to the pruner. An actor is one process that keeps its base
model and tokenized data between trials (``worker/state``'s caches), as a local worker does.

- **Slots.** On a cluster with GPUs: one actor per GPU, or with packing ``MAX_COTENANTS`` per GPU
  (``num_gpus=1/MAX_COTENANTS`` each, so Ray places them and sets ``CUDA_VISIBLE_DEVICES``). On CPUs
  only: ``--workers`` actors (default one), each with its share of the cores.
- **Packing by predicted memory.** Ray's resources are counted per node, not per GPU, and an
  actor's are fixed when it is created, so a per-trial memory share cannot be a Ray request without
  giving up the long-lived actor. The driver keeps the ledger instead (``Ledger``): a trial starts
  on its slot's GPU only while the predictions (the gate's, with the study's correction) of the
  trials on that GPU, plus its own, fit the GPU's memory; otherwise it waits for one to finish. A
  trial alone on a GPU always starts (the gate already skipped what cannot fit at all). Ray does
  not enforce GPU memory: an OOM is still caught by the worker and stored as ``oom``. Each trial
  stores its ``gpu_slot`` and ``cotenants`` (most other trials on its GPU while it ran).
- **Capacity.** A cluster may declare the resource ``autotune_gpu_mb`` (total MB over its GPUs,
  e.g. ``ray start --num-gpus 8 --resources '{"autotune_gpu_mb": 1150000}'``); otherwise the first
  actor reports its GPU's memory. The same 90% margin as the gate (``costs/calibration``).
- **Failures.** An actor that dies mid-trial (``ray.kill``, a node lost) returns a ``crashed``
  trial, which the driver re-queues with the same params (the retry policy of ``--workers``), and
  the slot gets a new actor. Ctrl-C interrupts every actor's trial at its next step; they are
  stored ``interrupted`` and re-queued for ``resume``.

Ray is imported only here, and only when this backend runs (``pip install -e ".[ray]"``).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import socket
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from autotune.errors import SpecError
from autotune.spec import StudySpec
from autotune.study.packing import Ledger
from autotune.trial import ReportFn, TrialConfig, TrialFn, TrialResult, TrialState

MAX_COTENANTS = (
    4  # actors per GPU when packing; gpu_packing.json: 4 MiniLM trials on one H200 ran 3.61x the trials/s of one
)
GPU_MB_RESOURCE = "autotune_gpu_mb"
EVENT_POLL_S = 0.5  # how long one call waits for the actor's next evaluation or result
# A CUDA context and cuBLAS workspace per actor process sit outside max_memory_allocated, which is
# what a prediction is of: added to each co-tenant's share. An assumption to be measured on a GPU
# (PyTorch's CUDA context is commonly a few hundred MB), not a figure measured here.
CUDA_CONTEXT_MB = 512.0


@dataclass(frozen=True)
class RayOptions:
    address: str | None = None  # None: a local Ray started for this run; "auto", "ray://host:10001"
    pack: bool | None = None  # None: on when the cluster has GPUs
    workers: int = 1  # actors on a cluster without GPUs


class _TrialHost:
    """A Ray actor (``ray.remote`` wraps it at run time): one trial at a time, in a thread of its
    own, so the driver can poll its evaluations, answer the pruner and interrupt it."""

    def __init__(self, threads: int | None, trial_fn: TrialFn | None = None) -> None:
        if threads:
            os.environ["AUTOTUNE_THREADS"] = str(threads)
        self._trial_fn = trial_fn  # a stand-in for the worker (bench/scaling.py's sleep trials)
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._decisions: queue.Queue[bool] = queue.Queue()
        self._interrupt = threading.Event()

    def where(self) -> dict[str, Any]:
        import ray

        gpus = [str(g) for g in ray.get_gpu_ids()]
        return {"host": socket.gethostname(), "pid": os.getpid(), "gpus": gpus}

    def start(self, config: TrialConfig) -> None:
        from autotune.study.driver import default_trial_fn

        run = self._trial_fn or default_trial_fn()
        self._interrupt.clear()
        for q in (self._events, self._decisions):
            while not q.empty():
                q.get_nowait()

        def report(step: int, value: float) -> bool:
            self._events.put(("report", step, value))
            return self._decisions.get()

        def go() -> None:
            try:
                result = run(config, report, self._interrupt)
            except BaseException as err:  # the worker stores its own failures; this is a bug's
                result = TrialResult(state=TrialState.CRASHED, error=f"{err.__class__.__name__}: {err}")
            self._events.put(("done", result))

        threading.Thread(target=go, daemon=True).start()

    def next_event(self, timeout: float) -> tuple[Any, ...] | None:
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def decide(self, stop: bool) -> None:
        self._decisions.put(stop)

    def interrupt(self) -> None:
        self._interrupt.set()
        self._decisions.put(True)  # a trial waiting on the pruner's answer stops now

    # the calibration probe, where the trials run (costs.calibration.RemoteProbe)
    def device_key(self, spec: StudySpec) -> str:
        from autotune.costs.probe import device_key

        return device_key(spec)

    def calibrate(self, spec: StudySpec, cache_dir: str | None) -> dict[str, Any]:
        from autotune.costs.probe import calibrate

        return calibrate(spec, cache_dir).to_json()

    def device_memory_mb(self, device_type: str) -> float | None:
        from autotune.costs.probe import device_memory_mb

        return device_memory_mb(device_type)

    def memory_kind(self, device_type: str) -> str:
        from autotune.worker.memory import memory_kind

        return memory_kind(device_type)


@dataclass
class _Pool:
    ray: Any
    host_cls: Any
    options: dict[str, Any]  # Ray's options for each actor (num_gpus, num_cpus)
    threads: int | None
    trial_fn: TrialFn | None
    actors: list[Any]
    where: list[dict[str, Any]]
    ledger: Ledger | None
    gate: Any = None  # the driver's Gate, once made (Slots.on_gate)
    study: str = ""
    generation: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def new_actor(self, k: int) -> None:
        self.generation[k] += 1  # a slot's actors are named by slot and generation: ray.get_actor finds them
        name = f"autotune:{self.study}:{k}:{self.generation[k]}"
        actor = self.host_cls.options(name=name, **self.options).remote(self.threads, self.trial_fn)
        where = self.ray.get(actor.where.remote())
        with self.lock:
            self.actors[k], self.where[k] = actor, where

    def slot_name(self, k: int) -> str:
        w = self.where[k]
        return f"{w['host']}:gpu{','.join(w['gpus'])}" if w["gpus"] else f"{w['host']}:cpu"

    def need_mb(self, c: TrialConfig) -> float:
        """The gate's prediction for this config (with the study's correction) plus a CUDA
        context; 0 without predictions (every trial then fits: packing falls back to a count)."""
        if self.gate is None:
            return 0.0
        params = {"rank": c.rank, "batch_size": c.batch_size, "target_modules": c.model.target_modules,
                  "use_dora": c.use_dora}  # fmt: skip
        raw = self.gate.predict(params, bool(c.gradient_checkpointing) and self.gate.auto)
        if raw is None:
            return 0.0
        context = CUDA_CONTEXT_MB if self.gate.cal.device == "cuda" else 0.0
        return float(self.gate.correction.apply(raw).peak_memory_mb) + context


def _slot_fn(pool: _Pool, k: int) -> TrialFn:
    ray = pool.ray

    def run(config: TrialConfig, report: ReportFn, stop: threading.Event | None) -> TrialResult:
        stop = stop or threading.Event()
        gpu = pool.slot_name(k)
        ledger = pool.ledger
        share = ledger.hold(gpu, pool.need_mb(config), stop) if ledger else contextlib.nullcontext(None)
        with share as holder:
            if ledger is not None and holder is None:  # Ctrl-C while waiting for room
                return TrialResult(state=TrialState.INTERRUPTED, error="interrupted before it started")
            result = _on_actor(ray, pool.actors[k], config, report, stop)
            cotenants = holder.cotenants if holder is not None else None
        if result is None:  # the actor died: a crash, re-queued by the driver with the same params
            pool.new_actor(k)
            return TrialResult(state=TrialState.CRASHED, error="the Ray actor running it died", gpu_slot=gpu)
        return replace(result, gpu_slot=gpu, cotenants=cotenants)

    return run


def _on_actor(ray: Any, actor: Any, config: TrialConfig, report: ReportFn, stop: threading.Event) -> TrialResult | None:
    """Run one trial on ``actor``, answering its evaluations with ``report``; None if it died."""
    from ray.exceptions import RayActorError

    sent_stop = False
    try:
        ray.get(actor.start.remote(config))
        while True:
            if stop.is_set() and not sent_stop:
                actor.interrupt.remote()
                sent_stop = True
            event = ray.get(actor.next_event.remote(EVENT_POLL_S))
            if event is None:
                continue
            if event[0] == "report":
                actor.decide.remote(bool(report(int(event[1]), float(event[2]))))
            else:
                return event[1]  # type: ignore[no-any-return]
    except RayActorError:
        return None


@dataclass
class _Probe:
    """costs.calibration.RemoteProbe on slot 0's actor."""

    ray: Any
    actor: Any

    def device_key(self, spec: StudySpec) -> str:
        return str(self.ray.get(self.actor.device_key.remote(spec)))

    def calibrate(self, spec: StudySpec, cache_dir: str | None) -> dict[str, Any]:
        return dict(self.ray.get(self.actor.calibrate.remote(spec, cache_dir)))

    def device_memory_mb(self, device_type: str) -> float | None:
        v = self.ray.get(self.actor.device_memory_mb.remote(device_type))
        return None if v is None else float(v)

    def memory_kind(self, device_type: str) -> str:
        return str(self.ray.get(self.actor.memory_kind.remote(device_type)))


def connect(options: RayOptions) -> Any:
    """Ray, connected: the running one (tests, notebooks), the cluster at ``--address``, or a local
    one for this run. One line on a missing extra or an address that does not answer."""
    try:
        import ray
    except ImportError:
        raise SpecError('--backend ray needs Ray: pip install -e ".[ray]"') from None
    if not ray.is_initialized():
        try:
            ray.init(address=options.address, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as err:
            first = (str(err).splitlines() or [""])[0]
            raise SpecError(f"--address {options.address}: cannot connect to Ray ({first})") from None
    return ray


def make_slots(options: RayOptions, study: str, trial_fn: TrialFn | None = None) -> tuple[Any, Any]:
    """The actors, and the driver's ``Slots`` over them. Returns (Slots, pool). ``trial_fn``
    replaces the worker on the actors (a benchmark of the driver alone: no probe, no gate)."""
    from autotune.costs.calibration import CUDA_MARGIN
    from autotune.study.slots import Slots

    ray = connect(options)
    res = ray.cluster_resources()
    gpus = int(res.get("GPU", 0))
    pack = options.pack if options.pack is not None else gpus > 0
    if gpus:
        per_gpu = MAX_COTENANTS if pack else 1
        n, opts, threads = gpus * per_gpu, {"num_gpus": 1 / per_gpu, "num_cpus": 0}, None
    else:
        if pack:
            raise SpecError("--pack needs GPUs in the Ray cluster (none found)")
        cpus = max(1, int(res.get("CPU", 1)))
        n = max(1, options.workers)
        opts, threads = {"num_cpus": max(1, cpus // n)}, max(1, cpus // n)
    host_cls = ray.remote(max_concurrency=4)(_TrialHost)
    pool = _Pool(ray, host_cls, opts, threads, trial_fn, [None] * n, [{}] * n, None, study=study,
                 generation=[-1] * n)  # fmt: skip
    for k in range(n):
        pool.new_actor(k)
    if pack:
        if GPU_MB_RESOURCE in res:
            capacity = float(res[GPU_MB_RESOURCE]) / gpus
        else:
            capacity = float(ray.get(pool.actors[0].device_memory_mb.remote("cuda")) or math.inf)
        pool.ledger = Ledger(capacity * CUDA_MARGIN)

    def on_gate(gate: Any) -> None:
        pool.gate = gate

    slots = Slots([_slot_fn(pool, k) for k in range(n)], _Probe(ray, pool.actors[0]), on_gate, gate=trial_fn is None)
    return slots, pool


def run(
    url: str,
    name: str,
    spec: StudySpec | None,
    limits: Any,
    n_trials: int | None,
    options: RayOptions,
    show_progress: bool = True,
    cache_dir: str | None = None,
    trial_fn: TrialFn | None = None,
) -> Any:
    """``autotune run/resume --backend ray``: the study driven here, its trials on Ray's actors
    (``trial_fn``: a stand-in for the worker there, for benchmarks of the driver)."""
    from autotune.study import driver

    slots, pool = make_slots(options, name, trial_fn)
    try:
        if spec is None:
            return driver.resume_study(url, name, n_trials=n_trials, show_progress=show_progress,
                                       cache_dir=cache_dir, limits=limits, slots=slots)  # fmt: skip
        return driver.run_study(spec, url, study_name=name, n_trials=n_trials, show_progress=show_progress,
                                cache_dir=cache_dir, limits=limits, slots=slots)  # fmt: skip
    finally:
        for actor in pool.actors:  # the actors go with the run; a Ray started for it, with the process
            with contextlib.suppress(Exception):
                ray_kill(pool.ray, actor)


def ray_kill(ray: Any, actor: Any) -> None:
    ray.kill(actor, no_restart=True)
