"""A retrieval setup built on first use: reading a stored study loads no embedder and builds no index."""

from __future__ import annotations

import functools
import logging

from ..data.dataset import load_dataset
from ..retrieval import embedding
from ..retrieval.setup import prepare, select_queries

log = logging.getLogger(__name__)
_EMBEDDERS: dict[tuple, embedding.Embedder] = {}


class LazySetup:
    """A :class:`~toolbench_lib.retrieval.setup.RetrievalSetup` stand-in that builds one when needed."""

    def __init__(self, cfg) -> None:
        self._cfg = cfg
        self._setup = None
        self._queries = None

    @property
    def built(self) -> bool:
        return self._setup is not None

    @functools.cached_property
    def ds(self):
        return load_dataset(self._cfg.data_dir)  # the very object the built setup holds

    @property
    def queries(self):
        if self._setup is not None:
            return self._setup.queries
        if self._queries is None:
            self._queries = select_queries(self.ds, self._cfg.subsets, self._cfg.limit)
        return self._queries

    @property
    def api_ids(self) -> list[str]:
        return self.ds.registry["api_id"].tolist()

    @property
    def model(self) -> str:
        """The embedder name results record, resolved without loading the model."""
        if self._setup is not None:
            return self._setup.embedder.name
        return embedding.resolve_model_name(self._cfg.embedder)

    @property
    def embedder_backend(self) -> str:
        return self._setup.embedder.backend if self._setup is not None else embedding.resolve_backend(None)

    def build(self):
        """The full :class:`~toolbench_lib.retrieval.setup.RetrievalSetup` (built once)."""
        if self._setup is None:
            cfg = self._cfg
            log.info("loading the embedder and building the index")
            key = (cfg.embedder, embedding.resolve_backend(None))
            if key not in _EMBEDDERS:  # one model per process: a notebook's studies share it
                _EMBEDDERS[key] = embedding.load_embedder(cfg.embedder)
            self._setup = prepare(self.ds, _EMBEDDERS[key], cfg.subsets, cfg.max_apis, cfg.limit, cfg.seed)
        return self._setup

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.build(), name)


def setup_model(setup) -> tuple[str, str]:
    """``(embedder name, embedder backend)`` of a setup, lazy or built, without building it."""
    if isinstance(setup, LazySetup):
        return setup.model, setup.embedder_backend
    return setup.embedder.name, getattr(setup.embedder, "backend", "fp32")
