"""Test support that ships with the package, as ``optuna/testing/`` does: fixtures the tests
and the benchmarks both build on. Nothing in the library imports it.
"""
