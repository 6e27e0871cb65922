"""The files a spec names, checked before any trial, torch-free: the examples (examples.py,
stdlib_docstrings.py for the quickstart's data), the model's files (model_files.py), the data's
fingerprint (fingerprint.py), and ``check.check_inputs``, every check that runs before a trial.
"""
