"""Analyses of stored study runs; each returns a DataFrame that notebooks show and save."""
