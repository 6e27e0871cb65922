"""The trial worker: model, data, AMP training loop and measurement.

It never imports optuna or autotune.storage; the driver imports it lazily. Use
``autotune.worker.run_trial.run_trial(config, report)`` to run one trial on its own.
"""
