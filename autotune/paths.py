"""Where autotune keeps its caches: ``$AUTOTUNE_CACHE_DIR``, else ``$XDG_CACHE_HOME/autotune``,
else ``~/.cache/autotune``. Light (no torch), so the data builders can use it too."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    root = os.environ.get("AUTOTUNE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "autotune"
    )
    return Path(root)
