from __future__ import annotations

import json
from typing import Any

import optuna
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from autotune.storage import Store
from autotune.storage.migrate import VERSION_TABLE, current_revision, downgrade, head_revision, include_name, upgrade
from autotune.storage.tables import metadata
from tests.conftest import optuna_url

OUR_TABLES = {"autotune_studies", "autotune_trials", "autotune_curves", VERSION_TABLE}


def test_upgrade_on_an_empty_database(any_db_url: str) -> None:
    store = Store.open(any_db_url, create=True)
    names = set(inspect(store.engine).get_table_names())
    assert names >= OUR_TABLES, names
    assert current_revision(store.engine) == head_revision()
    assert "alembic_version" not in names  # that name belongs to Optuna's schema


def test_upgrade_beside_optuna_tables_and_back(any_db_url: str) -> None:
    optuna.create_study(study_name="o", storage=optuna_url(any_db_url))  # Optuna first: its tables + alembic_version
    store = Store.open(any_db_url, create=True)
    names = set(inspect(store.engine).get_table_names())
    assert {"studies", "trials", "alembic_version"} <= names
    assert names >= OUR_TABLES
    with store.engine.connect() as conn:
        optuna_rev = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        ours = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar_one()
    assert ours == head_revision()
    assert optuna_rev != ours
    # Optuna still reads its study after our migration ran.
    assert optuna.load_study(study_name="o", storage=optuna_url(any_db_url)).study_name == "o"
    downgrade(store.engine, "base")
    names = set(inspect(store.engine).get_table_names())
    assert not (names & {"autotune_studies", "autotune_trials", "autotune_curves"})
    assert {"studies", "trials"} <= names  # Optuna's tables untouched
    upgrade(store.engine)
    assert current_revision(store.engine) == head_revision()


def test_models_match_migrations_and_ignore_optuna(any_db_url: str) -> None:
    optuna.create_study(study_name="o", storage=optuna_url(any_db_url))
    store = Store.open(any_db_url, create=True)
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn, opts={"include_name": include_name, "compare_type": True, "version_table": VERSION_TABLE}
        )
        diff = compare_metadata(ctx, metadata)
    assert diff == [], f"models and migrations differ, or Optuna's tables are proposed for change: {diff}"


def test_optuna_dashboard_can_open_the_database(any_db_url: str) -> None:
    """optuna-dashboard (a dev dependency) serves the study from a database that holds our
    tables too: its JSON API answers over WSGI, no server needed."""
    from wsgiref.util import setup_testing_defaults

    from optuna_dashboard._app import create_app  # type: ignore[import-not-found]

    url = optuna_url(any_db_url)
    optuna.create_study(study_name="o", storage=url).optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    Store.open(any_db_url, create=True)
    app = create_app(optuna.storages.RDBStorage(url))
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ["PATH_INFO"] = "/api/studies"
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    assert status == ["200 OK"], body[:300]
    assert [s["study_name"] for s in json.loads(body)["study_summaries"]] == ["o"]
