"""The report: front, sections, scorecard, teaching material, checks, HTML, and the notebooks' run that
writes it."""
