"""Evaluation: ranx runs and qrels from a study, one summary, one statistics module."""
