"""LLM backends behind one interface (``base``), their versioned prompts, reply parsers, plan-name resolution,
the call store, the caching wrapper, cassettes and the replay backend."""
