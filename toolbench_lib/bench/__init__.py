"""``python -m toolbench_lib bench``: speed figures of this machine, each a ratio of a baseline and a
candidate measured side by side in one process; ``--quick`` shrinks every line to a few seconds."""

from .core import BenchLine, format_table, machine_info, run_bench

__all__ = ["BenchLine", "format_table", "machine_info", "run_bench"]
