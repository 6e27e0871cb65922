"""Predict each config's peak memory and time before a study: a calibration probe, and a model
of what memory is made of."""
