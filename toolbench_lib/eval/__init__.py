"""Evaluation: ranx runs and qrels from a study, one summary, one statistics module, TREC export, and the
former hand-written metrics (``metrics``) that the explorer still uses."""
