"""Retrieval: embedders and their cache, the FAISS index, sub-registries, rankings, setup, retrievers."""
