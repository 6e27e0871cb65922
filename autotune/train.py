"""``autotune.train.load_trained``: the path the README documents for loading an adapter that
`autotune train` saved. The code lives in ``autotune.handoff.train``; this name stays for users."""

from autotune.handoff.train import load_trained

__all__ = ["load_trained"]
