"""The explorer's speed on a stored run, as a user sees it in Chromium: ``python -m tests.explorer_timing
[--run-name default]`` (a benchmark, not a test: run it with nothing else running).

Serves the run as ``make explore`` does, opens the page (seconds until the explorer shows), times 30
changes in the main study (k, set and method B in turn, each until the page shows its result), switches
to the retriever study (timed) and times 30 more there; prints each study's median and p90 and every page
kernel's resident memory."""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from toolbench_lib.explorer.app import prepare_views
from toolbench_lib.explorer.data import catalogue

from .test_browser import CHROMIUM, SHOTS, TIMEOUT_MS, _kernels, _launch, _select, _set_k, serve
from .test_browser_tasks import SHOWS

K_VALUES = (3, 7, 10, 1, 15, 20, 5, 8, 2, 12)
SETS = ("G2", "G3", "G1")


def _changes(page, timings: list[float]) -> None:
    """30 changes: k, set and method B in turn, each timed until the page shows it."""
    def timed(action, text: str, where: str = ".qx-count") -> None:
        t0 = time.perf_counter()
        action()
        page.wait_for_function(SHOWS, arg=[where, text], polling="raf", timeout=TIMEOUT_MS)
        timings.append(time.perf_counter() - t0)

    select = page.locator(".qx-method-b select")
    labels = [t.replace("\xa0", " ") for t in select.locator("option").all_inner_texts()]
    for i, k in enumerate(K_VALUES):
        timed(lambda k=k: _set_k(page, k), f"recall@{k}:")
        subset = SETS[i % len(SETS)]
        timed(lambda s=subset: _select(page, "subset", s), f"in {subset}")
        label = labels[(i + 2) % len(labels)]
        timed(lambda lb=label: select.select_option(label=lb), f"{label} wins")


def _line(name: str, seconds: list[float]) -> str:
    p90 = statistics.quantiles(seconds, n=10)[-1]
    return (f"{name}: {len(seconds)} changes, median {statistics.median(seconds):.3f} s, p90 {p90:.3f} s, "
            f"max {max(seconds):.3f} s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-name", default="default")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    prepare_views(args.run_name)
    entries = catalogue(args.run_name)[0]
    other = next(e.run_name for e in entries if e.run_name.endswith("-retrievers"))
    log = Path(tempfile.mkdtemp()) / "voila.log"
    with serve(args.run_name, log) as (url, proc, _log), sync_playwright() as p:
        profile = SHOTS / f".profile-{uuid.uuid4().hex[:8]}"
        ctx = _launch(p, CHROMIUM, profile)
        try:
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(url, timeout=TIMEOUT_MS)
            page.wait_for_selector(".qx-output .qx", timeout=TIMEOUT_MS)
            print(f"page shows the explorer of {args.run_name}: {time.perf_counter() - t0:.2f} s", flush=True)
            main_s: list[float] = []
            _changes(page, main_s)
            print(_line(args.run_name, main_s), flush=True)
            t0 = time.perf_counter()
            _select(page, "study", other)
            page.wait_for_function(SHOWS, arg=[".qx-provenance", f"outputs/{other}/"], polling="raf",
                                   timeout=TIMEOUT_MS)
            print(f"switch to {other}: {time.perf_counter() - t0:.2f} s", flush=True)
            other_s: list[float] = []
            _changes(page, other_s)
            print(_line(other, other_s), flush=True)
            for kernel in _kernels(proc):
                print(f"page kernel {kernel.pid}: {kernel.memory_info().rss / 2**20:.0f} MiB resident")
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)


if __name__ == "__main__":
    main()
