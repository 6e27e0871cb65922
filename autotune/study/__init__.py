"""Running one study, with one worker or N: set-up (setup.py), the run loop (driver.py), the
predictions' gate (gate.py), reasons to stop (guard.py), retries and reaping (recovery.py), the
progress display, a run's limits, its summary and Ctrl-C (summary.py, interrupt.py), N worker
processes (parallel.py), warm start and bound expansion (warm_start.py, expand.py).

Never write ``from autotune import study``: half the code names its Optuna study ``study``.
"""
