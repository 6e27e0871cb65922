"""autotune's storage: our tables (SQLAlchemy + alembic) beside Optuna's RDBStorage tables."""

from autotune.errors import StorageError
from autotune.storage.store import Store, StudyRow
from autotune.storage.url import DEFAULT_URL, ENV_VAR, redact, resolve_url

__all__ = ["DEFAULT_URL", "ENV_VAR", "StorageError", "Store", "StudyRow", "redact", "resolve_url"]
