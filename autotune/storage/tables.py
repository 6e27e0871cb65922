"""autotune's own tables, beside Optuna's in the same database.

Rows link to Optuna's by ``(study_name, trial_number)``, never by a foreign key into Optuna's
private tables. Every table is named ``autotune_*`` so migrations can ignore everything else.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
)

from autotune.trial import FINISHED_STATES, TrialState

PREFIX = "autotune_"
metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "pk": "pk_%(table_name)s",
    }
)

studies = Table(
    "autotune_studies",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_name", String(512), nullable=False, unique=True),
    Column("spec_yaml", Text, nullable=False),
    Column("labels", JSON, nullable=True),  # seq-cls label names, index = class id
    Column("autotune_version", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("data_fingerprint", JSON, nullable=True),  # {field: {path, size, sha256}} (0003_plan)
    Column("calibration", JSON, nullable=True),  # {device key: the probe's Calibration} (0004_calibration)
)

trials = Table(
    "autotune_trials",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_name", String(512), nullable=False, index=True),
    Column("trial_number", Integer, nullable=False),
    Column("state", String(16), nullable=False),
    Column("params", JSON, nullable=False),
    Column("rank", Integer, nullable=True),
    Column("batch_size", Integer, nullable=True),
    Column("learning_rate", Float, nullable=True),
    Column("val_loss", Float, nullable=True),
    Column("train_loss", Float, nullable=True),
    Column("score", Float, nullable=True),
    Column("accuracy", Float, nullable=True),
    Column("wall_time_s", Float, nullable=True),
    Column("setup_time_s", Float, nullable=True),
    Column("train_time_s", Float, nullable=True),
    Column("eval_time_s", Float, nullable=True),
    Column("samples_per_s", Float, nullable=True),
    Column("tokens_per_s", Float, nullable=True),
    Column("peak_memory_mb", Float, nullable=True),
    Column("memory_kind", String(32), nullable=True),
    Column("device", String(128), nullable=True),
    Column("precision", String(8), nullable=True),
    Column("optimizer_steps", Integer, nullable=True),
    Column("examples_seen", Integer, nullable=True),
    Column("versions", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("target_modules", JSON, nullable=True),  # the module names that got adapters (resolved preset)
    Column("gradient_checkpointing", Boolean, nullable=True),  # ran with activations recomputed (0005)
    Column("rank_used", Integer, nullable=True),  # the rank trained, after lora.align_rank (0005)
    # --backend ray (0007): the GPU slot that ran it (host:gpu id) and how many other trials shared
    # that GPU while it ran (packing by predicted memory)
    Column("gpu_slot", String(256), nullable=True),
    Column("cotenants", Integer, nullable=True),
    Column("retry_of", Integer, nullable=True),  # the trial number this one re-runs
    # budget.confirm_top (0006): the search trial whose config this one re-trains at the target
    # budget (or, with other params, hedges: budget.confirm_hedge), the training seed it ran with,
    # and where its adapter was kept (budget.keep_adapters)
    Column("confirm_of", Integer, nullable=True),
    Column("train_seed", Integer, nullable=True),
    Column("adapter_dir", Text, nullable=True),
    Column("requeued", Boolean, nullable=False, default=False),  # a retry of this trial was queued
    Column("worker", String(256), nullable=True),  # host:pid, for reaping dead local workers
    Column("sampler_seed", BigInteger, nullable=True),  # the seed of the sampler that proposed it
    Column("duplicate_of", Integer, nullable=True),  # state duplicate: the trial whose result it shares
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("predicted_memory_mb", Float, nullable=True),  # from `autotune estimate`'s model (0003_plan)
    Column("predicted_time_s", Float, nullable=True),
    Column("not_run", Boolean, nullable=True),  # stopped by its prediction; not counted toward n_trials
    UniqueConstraint("study_name", "trial_number"),
)

# The rows that count toward a study's total (its n_trials, then its confirmation runs): a finished
# state, or crashed with its retries spent; not a re-queued row (its retry counts), nor one stopped
# by its prediction before any training (``not_run``, autotune.study.gate). Store.count_finished and
# the loop's slot count (claims.slots_taken) both count with it.
COUNTED_STATES = [s.value for s in FINISHED_STATES] + [TrialState.CRASHED.value]
COUNTED = and_(trials.c.state.in_(COUNTED_STATES), trials.c.requeued.is_(False), trials.c.not_run.is_not(True))

curves = Table(
    "autotune_curves",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_name", String(512), nullable=False),
    Column("trial_number", Integer, nullable=False),
    Column("eval_index", Integer, nullable=False),
    Column("optimizer_steps", Integer, nullable=False),
    Column("examples_seen", Integer, nullable=False),
    Column("val_loss", Float, nullable=True),
    Column("train_loss", Float, nullable=True),
    Column("score", Float, nullable=True),
    Column("accuracy", Float, nullable=True),
    UniqueConstraint("study_name", "trial_number", "eval_index"),
)

# One row per worker that joined a study: its slot (0, 1, 2, ... in order of joining) fixes the
# seed of its sampler, so no two workers draw the same stream (docs/architecture.md).
workers = Table(
    "autotune_workers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_name", String(512), nullable=False),
    Column("slot", Integer, nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("worker", String(256), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("study_name", "slot"),
)

# One row per `autotune train` fit: a stored trial's params trained at a longer budget.
fits = Table(
    "autotune_fits",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("study_name", String(512), nullable=False, index=True),
    Column("trial_number", Integer, nullable=False),
    Column("train_examples", Integer, nullable=False),  # the fit's budget
    Column("state", String(16), nullable=False),
    Column("params", JSON, nullable=False),
    Column("val_loss", Float, nullable=True),
    Column("train_loss", Float, nullable=True),
    Column("score", Float, nullable=True),
    Column("accuracy", Float, nullable=True),
    Column("train_time_s", Float, nullable=True),
    Column("eval_time_s", Float, nullable=True),
    Column("wall_time_s", Float, nullable=True),
    Column("peak_memory_mb", Float, nullable=True),
    Column("memory_kind", String(32), nullable=True),
    Column("device", String(128), nullable=True),
    Column("output_path", Text, nullable=True),  # where the adapter was saved (None until it is)
    Column("versions", JSON, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
)
