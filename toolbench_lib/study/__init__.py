"""The study: running, configuring, storing, recording and re-judging it; checks of user-given values."""
