"""The query explorer: stored per-query views, filters, rendering and its Voila app."""
