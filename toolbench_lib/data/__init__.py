"""The data: paths, atomic writes, name normalisation, query sets, the merged registry, the parquet cache."""
