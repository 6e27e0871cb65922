"""What Optuna searches and how: the spec's space as Optuna distributions (space.py), the
samplers and pruners by name (samplers.py), TPE's space-filling start-up (space_filling.py), the
bound probe and local sweep after it (sweep.py), the best-at-a-bound rule (bounds.py) and
warm-start priors (priors.py). Pure: the spec and optuna only, never the study or storage.

No re-exports here: ``cli/bound_notes.py`` imports ``search.bounds`` and must not load optuna.
"""
