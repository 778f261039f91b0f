"""The report: front, sections, scorecard, teaching material, checks, HTML, and the run that writes it."""
