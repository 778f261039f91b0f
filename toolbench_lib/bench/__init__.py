"""``python -m toolbench_lib bench``: speed figures of this machine, each a ratio measured side by side.

Every line runs its baseline and its candidate in the same process, one after the other (interleaved
where a line has halves), so both see the same machine load; the table records model, backend, data
size and parameters of each line. ``--quick`` shrinks every line to a few seconds (used by the tests).
"""

from .core import BenchLine, format_table, machine_info, run_bench

__all__ = ["BenchLine", "format_table", "machine_info", "run_bench"]
