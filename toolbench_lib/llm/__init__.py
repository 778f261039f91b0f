"""LLM backends behind one interface, their prompts, reply parsers, the call store, cassettes and replay."""
