"""Evaluation: the one count of hits and every metric, comparisons and their statistics, TREC export."""
