"""Alembic environment for autotune's tables only.

``include_name`` keeps autogenerate to ``autotune_*`` tables: Optuna's tables live in the same
database and must never be proposed for dropping.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import create_engine

from autotune.storage.migrate import VERSION_TABLE, include_name
from autotune.storage.tables import metadata

config = context.config


def _configure(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_migrations_online() -> None:
    engine = config.attributes.get("engine")
    if engine is None:
        url = config.get_main_option("sqlalchemy.url") or "sqlite:///autotune.db"
        engine = create_engine(url)
    with engine.begin() as connection:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        include_name=include_name,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
