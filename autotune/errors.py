"""Every error class and exit status of autotune, at the bottom of the package (as Optuna's
``exceptions.py``): any module raises without importing a higher layer. Imports nothing.

User errors are one line on stderr and ``EXIT_USER_ERROR``, never a traceback (cli/main.py
catches ``USER_ERRORS``); every other exception is a bug and keeps its traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_UNFINISHED = 1  # a run that stopped short of its total (or without one complete trial); a fit that failed
EXIT_USER_ERROR = 2  # a user error; also `autotune train` when a fit ran out of memory (its config is the problem)
EXIT_STOPPED = 3  # stopped early by a repeated identical crash or by predictions (autotune.study.guard)
EXIT_DB_UNAVAILABLE = 4  # the database stayed unreachable past AUTOTUNE_DB_RETRY_S (storage/retry.py)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


class SpecError(ValueError):
    """A user error in a spec (or a flag that overrides one): one line that names the problem."""


class DataError(ValueError):
    """A user error in the data section: one line naming the problem."""


class StorageError(ValueError):
    """A user error about the storage URL or database: one line, password-free."""


class DatabaseUnavailable(Exception):
    """The database stayed unreachable (refused, shutting down, locked) past the retry limit: one
    line and EXIT_DB_UNAVAILABLE. Not the user's error: the same command works once it is back."""


class ModelError(ValueError):
    """A user error about the model: one line."""


class FitError(Exception):
    """An `autotune train` fit that could not give an adapter: one line, with the exit status."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


# Errors that are the user's to fix: one line, exit 2. Database errors reach here as
# StorageError (translated once, in Store); anything else is a bug and keeps its traceback.
USER_ERRORS: tuple[type[BaseException], ...] = (SpecError, DataError, StorageError, FileNotFoundError)
