"""Warm runs only read: a stored study is returned without loading the embedder or building the index."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pandas as pd

from toolbench_lib.retrieval import embedding
from toolbench_lib.study import experiment, lazy_setup
from toolbench_lib.study.experiment import ExperimentConfig, get_study
from toolbench_lib.study.lazy_setup import LazySetup


def _cfg(data_dir, out):
    return ExperimentConfig(data_dir=str(data_dir), outputs_dir=str(out), subsets=["G1_instruction"],
                            backend="rules", embedder="all-MiniLM-L6-v2", runs=1, plan_limit=1)


def test_stored_study_is_read_without_embedder(mini_toolbench, tmp_path, monkeypatch, embedder):
    loads = []

    def counting_load(*args, **kwargs):
        loads.append(args)
        return embedder

    monkeypatch.setattr(embedding, "load_embedder", counting_load)
    monkeypatch.setattr(lazy_setup, "_EMBEDDERS", {})
    setup, first = get_study(_cfg(mini_toolbench, tmp_path))  # computes and stores the study
    assert len(loads) == 1 and setup.built
    setup, again = get_study(_cfg(mini_toolbench, tmp_path))
    assert isinstance(setup, LazySetup) and not setup.built and len(loads) == 1
    for table in ("rankings", "text_rankings"):
        pd.testing.assert_frame_equal(getattr(again, table).reset_index(drop=True),
                                      getattr(first, table).reset_index(drop=True))
    # what a reading cell needs comes without the model ...
    assert setup.ds.registry["api_id"].tolist() == setup.api_ids
    assert setup.queries["qkey"].tolist() == first.queries["qkey"].tolist()
    assert setup.model == "all-MiniLM-L6-v2" and not setup.built
    # ... and a cell that searches builds the setup once, on first use, with the model the process loaded
    assert len(setup.index) == len(setup.ds.registry)
    assert setup.built and len(loads) == 1
    assert setup.provenance["embedder_backend"] == "fp32"
    setup.encode(["weather"])
    other, _ = get_study(_cfg(mini_toolbench, tmp_path))  # another study of the process shares it too
    assert len(other.index) == len(setup.index) and other.built and len(loads) == 1
    monkeypatch.setattr(lazy_setup, "_EMBEDDERS", {})  # a new process loads it once
    fresh, _ = get_study(_cfg(mini_toolbench, tmp_path))
    assert len(fresh.index) == len(setup.index) and len(loads) == 2


def test_a_study_asked_for_twice_at_once_is_computed_once(mini_toolbench, tmp_path, monkeypatch, embedder):
    """Two notebooks asking for one study at the same time (`reproduce` runs two at once): the second waits
    for the first to store it, then reads it."""
    monkeypatch.setattr(embedding, "load_embedder", lambda *args, **kwargs: embedder)
    monkeypatch.setattr(lazy_setup, "_EMBEDDERS", {})
    computed, started, run_study = [], threading.Event(), experiment.run_study

    def slow_run(*args, **kwargs):
        computed.append(1)
        started.set()
        time.sleep(1.0)  # the other asks meanwhile
        return run_study(*args, **kwargs)

    monkeypatch.setattr(experiment, "run_study", slow_run)
    with ThreadPoolExecutor(2) as pool:  # a flock is per open file: threads stand for processes
        first = pool.submit(get_study, _cfg(mini_toolbench, tmp_path), progress=False)
        assert started.wait(120)
        second = pool.submit(get_study, _cfg(mini_toolbench, tmp_path), progress=False)
        (_, a), (_, b) = first.result(), second.result()
    assert len(computed) == 1
    pd.testing.assert_frame_equal(a.rankings.reset_index(drop=True), b.rankings.reset_index(drop=True))


def test_embedder_backend_keys_the_study(mini_toolbench, tmp_path, monkeypatch):
    """A non-default backend changes the study key; the default keeps the keys of stored studies."""
    base = _cfg(mini_toolbench, tmp_path).study_key()
    monkeypatch.setenv("TOOLBENCH_EMBED_BACKEND", "int8")
    cfg = _cfg(mini_toolbench, tmp_path)
    assert cfg.study_fields()["embedder_backend"] == "int8" and cfg.study_key() != base
    monkeypatch.delenv("TOOLBENCH_EMBED_BACKEND")
    assert "embedder_backend" not in _cfg(mini_toolbench, tmp_path).study_fields()
