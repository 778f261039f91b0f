"""The study: running it (`result`), its configuration and run folders, recording, re-judging, checks of
user-given values."""
