"""toolbench_lib: tool discovery on the ToolBench registry, Retrieve-then-Plan vs Plan-then-Retrieve."""

__version__ = "0.1.0"
