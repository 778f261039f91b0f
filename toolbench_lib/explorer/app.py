"""``make explore``: the query explorer (notebook 08) served as an app by Voilà on 127.0.0.1.

It opens the study a run stored (``--run-name``); idle kernels of closed pages are culled, at most
``--max-pages`` run at once, and the views of every study of the run's family are computed before serving."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from tornado.web import HTTPError

from ..data.atomic import FolderWriteError
from ..data.paths import NOTEBOOKS_DIR
from ..llm.gemini import API_KEY_ENV_VARS
from ..study.experiment import stored_study_dir
from ..study.validation import OneLineParser, int_at_least, int_in_range, run_name
from .data import catalogue
from .views import ViewsFolderError, check_views_place, study_views, view_problem

EXPLORER_NOTEBOOK = NOTEBOOKS_DIR / "08_query_explorer.ipynb"
# The page's template: Voila's lab template less its links to a CDN (voila.js carries Font Awesome itself).
TEMPLATES = Path(__file__).resolve().parent / "jupyter"  # a Jupyter data folder: voila/templates/explorer
TEMPLATE = "explorer"
HOST = "127.0.0.1"
DEFAULT_PORT = 8866
CULL_IDLE_S = 45  # a closed page whose close beacon was lost goes in 45 + 15 s; a slow render outlives it
CULL_INTERVAL_S = 15
CELL_TIMEOUT_S = 120  # a cell outrunning it ends the page with a line saying so (a page shows in ~4 s)
MAX_PAGES = 4  # kernels at once: each holds one study's tables
MAX_PAGES_ENV = "TOOLBENCH_EXPLORE_MAX_PAGES"


def page_hook(handler, notebook, cwd):  # noqa: ARG001 (Voilà's prelaunch hook signature)
    """Before a page's kernel starts: refuse it in one line when ``--max-pages`` kernels already run, and
    set the ``_xsrf`` cookie (reading the token sets it) that the page's close beacon sends."""
    limit = int(os.environ.get(MAX_PAGES_ENV, MAX_PAGES))
    running = len(handler.kernel_manager.list_kernel_ids())
    if running >= limit:
        line = (f"the explorer serves at most {limit} pages at once and {running} are open: close one and "
                "reload this page (make explore EXPLORE_PAGES=N sets the limit)")
        raise HTTPError(503, line, reason=line)
    handler.xsrf_token  # noqa: B018 (its first read sets the cookie)
    return notebook


def voila_argv(port: int = DEFAULT_PORT, cull_idle_s: int = CULL_IDLE_S,
               cull_interval_s: int = CULL_INTERVAL_S) -> list[str]:
    """The command serving the explorer with this interpreter's Voilà (and :func:`page_hook`)."""
    return [sys.executable, "-m", "toolbench_lib.explorer.serve", str(EXPLORER_NOTEBOOK), "--no-browser",
            f"--Voila.ip={HOST}", f"--port={port}", "--Voila.port_retries=0", f"--template={TEMPLATE}",
            "--strip_sources=True", "--show_tracebacks=False",
            f"--MappingKernelManager.cull_idle_timeout={cull_idle_s}",
            f"--MappingKernelManager.cull_interval={cull_interval_s}",
            "--MappingKernelManager.cull_connected=False", f"--VoilaExecutor.timeout={CELL_TIMEOUT_S}",
            "--VoilaExecutor.cell_timeout_instruction=Reload the page to open the explorer again."]


def voila_env(run_name: str, max_pages: int = MAX_PAGES) -> dict[str, str]:
    """The environment of the app: the run to open, the most pages at once, offline, no progress bars, and no
    LLM API key (the explorer calls no LLM)."""
    env = {k: v for k, v in os.environ.items() if k not in API_KEY_ENV_VARS}
    # MIMALLOC_PURGE_DELAY=0: Arrow returns what reading a study freed at once (392 MB a kernel, not 628 MB)
    env.update(TOOLBENCH_EXPLORE_RUN=run_name, TQDM_DISABLE="1", HF_HUB_OFFLINE="1", MIMALLOC_PURGE_DELAY="0",
               **{MAX_PAGES_ENV: str(max_pages)}, PYTHONWARNINGS="ignore",
               JUPYTER_PATH=os.pathsep.join([str(TEMPLATES), *filter(None, [env.get("JUPYTER_PATH")])]))
    return env


def _compute_views(folders: list[Path]) -> None:
    for folder in folders:  # one after another in one process, sharing the fused runs they have in common
        study_views(folder, say=False)  # written beside the study; prepare_views said why they are computed


def prepare_views(run_name: str, echo=print, workers: int = 1) -> None:
    """Compute and store the views of every study of the run's family lacking current ones, ``workers`` at
    once in processes of their own, largest first; :class:`ViewsFolderError` when a file is in their way."""
    groups: dict[str, list[Path]] = {}  # a run and its retriever study (the same dense rankings) together
    for entry in catalogue(run_name)[0]:
        check_views_place(entry.folder)  # a file where the views belong: one line, nothing computed
        problem = view_problem(entry.folder)
        if problem:
            echo(f"explorer views of {entry.run_name}: {problem}; computing them once", flush=True)
            groups.setdefault(entry.run_name.removesuffix("-retrievers"), []).append(entry.folder)
    todo = sorted(groups.values(), reverse=True,  # largest (stored tables' bytes) first
                  key=lambda folders: sum(p.stat().st_size for f in folders for p in f.glob("*.parquet")))
    if workers <= 1 or len(todo) <= 1:
        _compute_views([f for group in todo for f in group])
        return
    with ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=get_context("spawn")) as pool:
        list(pool.map(_compute_views, todo))


def main(argv: list[str] | None = None) -> None:
    """Serve the explorer until interrupted (replaces this process with Voilà)."""
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-name", default="default", type=run_name,
                        help="the run whose stored study to open")
    parser.add_argument("--port", type=int_in_range(1, 65535), default=DEFAULT_PORT)
    parser.add_argument("--cull-idle", type=int_at_least(1), default=CULL_IDLE_S,
                        help="seconds after which an idle kernel (closed page) is shut down")
    parser.add_argument("--max-pages", type=int_at_least(1), default=MAX_PAGES,
                        help="pages (kernels) served at once; one more is refused in one line")
    args = parser.parse_args(argv)

    try:
        folder = stored_study_dir(args.run_name)
        prepare_views(args.run_name)
    except (FileNotFoundError, ViewsFolderError, FolderWriteError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)
        os._exit(1)  # no interpreter teardown: a native library's thread once aborted there, adding a line
    print(f"serving the explorer of {folder} at http://{HOST}:{args.port}/ (Ctrl-C stops it)", flush=True)
    cmd = voila_argv(args.port, args.cull_idle, min(CULL_INTERVAL_S, max(1, args.cull_idle // 2)))
    os.execve(cmd[0], cmd, voila_env(args.run_name, max_pages=args.max_pages))


if __name__ == "__main__":
    main()
