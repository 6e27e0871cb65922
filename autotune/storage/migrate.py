"""Run autotune's alembic migrations from inside the package (works from an installed wheel).

Our version table is ``autotune_alembic_version``, so it never collides with the
``alembic_version`` table that Optuna's own schema stamps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from autotune.storage.tables import PREFIX

VERSION_TABLE = "autotune_alembic_version"


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Autogenerate sees only ``autotune_*`` tables: Optuna's, in the same database, are never
    proposed for dropping."""
    if type_ == "table":
        return bool(name) and str(name).startswith(PREFIX)
    return True


MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    command.downgrade(alembic_config(engine), revision)
