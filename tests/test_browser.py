"""The explorer app in a real browser (headless Debian Chromium driven by Playwright, never
its own browser download).

The app: Voilà serves notebook 08 over a small stored study; the page searches, filters, sorts the table,
picks a row, swaps the methods and changes k, each change timed (the seconds printed; asserted only under a
generous 2 s), every view checked against the stored tables scored independently (``eval.runs``); the
view's link, opened in a second page, shows the same view. Screenshots of a search result and a sorted
table go to outputs/browser/ (``report.html`` is loaded in Chromium by the smoke run of ``reproduce``)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from contextlib import contextmanager
from http.cookiejar import CookieJar
from pathlib import Path

import pandas as pd
import psutil
import pytest

from toolbench_lib.data.paths import OUTPUTS_DIR
from toolbench_lib.eval.evaluation import per_query_runs
from toolbench_lib.explorer.app import CELL_TIMEOUT_S, CULL_IDLE_S, HOST, prepare_views, voila_argv, voila_env
from toolbench_lib.explorer.data import NO_PLAN, PAGE_ROWS
from toolbench_lib.study.experiment import ExperimentConfig, get_study

from .axe import required

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = OUTPUTS_DIR / "browser"
MAX_CHANGE_S = 2.0  # a generous bound: the printed table is the measurement (0.57 s seen on a loaded host)
TIMEOUT_MS = 180_000  # generous: the machine is shared, and Voilà runs the notebook before the page shows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def chromium() -> Path:
    return required(CHROMIUM,
                    f"{CHROMIUM} is missing: apt-get install -y chromium chromium-driver (.ci/run does)")


@pytest.fixture(scope="module")
def stored(slice_setup):
    """A smoke-sized stored run (rules backend on the 2,500-API slice): ``(run name, StudyResult)``."""
    name = f"pytest_browser_{uuid.uuid4().hex[:8]}"
    cfg = ExperimentConfig.build(run_name=name, smoke=True)
    _, result = get_study(cfg, setup=slice_setup, progress=False)
    yield name, result
    for folder in [OUTPUTS_DIR / name, *OUTPUTS_DIR.glob(f"{name}-*")]:  # and the studies run beside it
        shutil.rmtree(folder, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@contextmanager
def serve(run_name: str, log: Path, max_pages: int = 4, cull_idle_s: int = CULL_IDLE_S):
    """`make explore`'s Voilà for ``run_name`` on a free loopback port, kernels culled as `make explore` does:
    ``(url, process, log)``, the server stopped on exit.

    Shorter timeouts let the server cull a kernel that is still rendering the page: Voilà executes the
    notebook before any browser connects, and on a loaded machine a quiet cell (loading the study, a first
    ranx compile) outlasted a 4-second limit."""
    for _ in range(3):  # a port taken between _free_port and Voilà's bind (a kernel's TCP socket): another
        port, url = _free_port(), None
        with log.open("w") as out:
            proc = subprocess.Popen(voila_argv(port, cull_idle_s=cull_idle_s, cull_interval_s=5),
                                    env=voila_env(run_name, max_pages=max_pages), stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 120
        while proc.poll() is None and time.time() < deadline:
            if f"http://{HOST}:{port}/" in log.read_text():  # Voilà's own line, printed once it has bound
                url = f"http://{HOST}:{port}/"
                break
            time.sleep(0.5)
        if url or "already in use" not in log.read_text():
            break
    try:
        assert url, f"voila did not serve on {port}:\n{log.read_text()[-3000:]}"
        yield url, proc, log
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


@pytest.fixture(scope="module")
def app(stored, tmp_path_factory):
    """The explorer app of the stored run (its views computed first, as `make explore` does)."""
    prepare_views(stored[0], echo=lambda *a, **k: None)
    with serve(stored[0], tmp_path_factory.mktemp("voila") / "voila.log") as served:
        yield served


def _kernels(proc: subprocess.Popen) -> list[psutil.Process]:
    """The server's live kernel processes; one that exits while they are listed (a zombie, or gone) is not."""
    out = []
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "ipykernel_launcher" in " ".join(child.cmdline()):
                out.append(child)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            continue
    return out


ALIAS = {"G1_instruction": "G1", "G2_category_original": "G2", "G3_instruction_original": "G3"}


def _recalls(result, k: int, a: str = "rtp", b: str = "ptr") -> pd.DataFrame:
    """Per query (study order), each method's recall averaged over the study's runs (the page's default
    view): ``qkey, query_id, subset, a, b, gap``, scored by eval.runs."""
    pq = per_query_runs(result, k)
    # rounded as the page rounds: equal recalls summed in another order tie
    wide = pq.pivot_table(index="qkey", columns="method", values="recall", aggfunc="mean").round(12)
    q = result.queries
    out = pd.DataFrame({"qkey": q["qkey"], "query_id": q["query_id"].astype(str),
                        "subset": q["subset"].map(ALIAS), "text": q["query"].astype(str)})
    out["a"] = out["qkey"].map(wide[a]).to_numpy()
    out["b"] = out["qkey"].map(wide[b]).to_numpy()
    out["gap"] = out["a"] - out["b"]
    return out.reset_index(drop=True)


def _head(result) -> str:
    """How the page's query heading names its runs: the mean of the study's runs (rankings, stubs and plans
    of run 0), or run 0 alone."""
    n = result.n_runs
    return f"recall: mean of {n} runs; rankings, stubs and plans: run 0" if n > 1 else "run 0"


def _largest_gap(frame: pd.DataFrame) -> str:
    return str(frame.assign(abs_gap=frame["gap"].abs(), order=range(len(frame)))
               .sort_values(["abs_gap", "order"], ascending=[False, True], kind="stable")["qkey"].iloc[0])


def _top(result, qkey: str, method: str, k: int) -> list[str]:
    h = result.rankings
    h = h[(h["qkey"] == qkey) & (h["method"] == method) & (h["run"] == 0)]
    return h.sort_values("rank")["api_id"].head(k).tolist()


def _check_query(page, result, qkey: str, k: int) -> None:
    """The page shows this query under this k: text, ground truth, both rankings with hits, stubs, plans."""
    from playwright.sync_api import expect

    row = result.queries.set_index("qkey").loc[qkey]
    out = page.locator(".qx-output")
    expect(out.locator("h3").first).to_contain_text(f"query {row['query_id']} ({_head(result)}, k = {k})",
                                                    timeout=TIMEOUT_MS)
    assert out.locator("blockquote").inner_text().strip() == str(row["query"]).strip()
    gt_text = out.locator("ul").first.inner_text()
    candidates = [str(a) for a in row["candidates"]]
    assert all(a in gt_text for a in candidates)
    for method in ("rtp", "ptr"):
        column = out.locator(f".method-{method}")
        ranking = column.locator("ol").first.locator("li")
        expected = _top(result, qkey, method, k)
        assert ranking.count() == len(expected) == k
        shown = [ranking.nth(i).locator("code").inner_text() for i in range(k)]
        assert shown == expected, method
        marked = column.locator("ol").first.locator("li.hit").count()
        assert marked == len(set(expected) & set(candidates)), method
        plans = result.plans[(result.plans["qkey"] == qkey) & (result.plans["method"] == method)
                             & (result.plans["run"] == 0)]
        text = column.inner_text()
        if len(plans):
            assert f"verdict: {plans.iloc[0]['verdict']}" in text and NO_PLAN not in text
        else:
            assert NO_PLAN in text
    stubs = result.stubs[(result.stubs["qkey"] == qkey) & (result.stubs["run"] == 0)]
    ptr_text = out.locator(".method-ptr").inner_text()
    assert f"Stubs ({len(stubs)}" in ptr_text and all(str(n) in ptr_text for n in stubs["name"])


def _rows(page) -> list[str]:
    """The query ids of the table's shown rows, top to bottom."""
    return page.evaluate("() => [...document.querySelectorAll('.qx-row')].filter(r => r.offsetParent)"
                         ".map(r => r.querySelector('button').innerText.trim())")


def _timed(page, action, condition: str, arg=None) -> float:
    """Seconds from an action until a condition (a JavaScript function of ``arg``) holds in the page,
    polled at every animation frame."""
    t0 = time.perf_counter()
    action()
    page.wait_for_function(condition, arg=arg, polling="raf", timeout=TIMEOUT_MS)
    return time.perf_counter() - t0


SHOWS = "([sel, text]) => [...document.querySelectorAll(sel)].some(e => e.innerText.includes(text))"
ROWS_ARE = ("(ids) => { const shown = [...document.querySelectorAll('.qx-row')].filter(r => r.offsetParent)"
            ".map(r => r.querySelector('button').innerText.trim()); return JSON.stringify(shown) === "
            "JSON.stringify(ids); }")


def _select(page, control: str, label_start: str) -> None:
    select = page.locator(f".qx-{control} select")
    labels = [t.replace("\xa0", " ") for t in select.locator("option").all_inner_texts()]  # widgets use nbsp
    select.select_option(index=next(i for i, t in enumerate(labels) if t.startswith(label_start)))


def _set_k(page, k: int) -> None:
    readout = page.locator(".qx-k .widget-readout")
    readout.click()
    page.keyboard.press("Control+A")
    page.keyboard.type(str(k))
    page.keyboard.press("Enter")


def _summary(frame: pd.DataFrame, k: int) -> str:
    a, b = frame["a"], frame["b"]
    return (f"mean recall@{k}: RtP {a.mean():.3f}, PtR {b.mean():.3f} · RtP wins {(a > b).sum()}, "
            f"ties {(a == b).sum()}, PtR wins {(b > a).sum()}")


def _launch(p, chromium: Path, profile: Path, height: int = 1600):
    return p.chromium.launch_persistent_context(str(profile), executable_path=str(chromium), headless=True,
                                                args=FLAGS, viewport={"width": 1400, "height": height})


SHOWN_OR_ENDED = ("() => document.querySelector('.qx-output .qx') !== null || "
                  "document.body.innerText.includes('Cell execution timed out')")


def _show(ctx, url: str, proc, log: Path, what: str):
    """A new page on ``url`` once it shows a query. A page whose cell outran Voilà's cell timeout (a kernel's
    reply lost on a loaded host: a CI run's page stayed blank for 180 s) is closed, its kernel let go, and
    the page opened once more, said in a printed line; a second such page fails the test."""
    before = len(_kernels(proc))
    for attempt in (1, 2):
        t = time.time()
        page = ctx.new_page()
        try:  # the DOM, not every subresource: the rendered table is what the page needs
            page.goto(url, timeout=TIMEOUT_MS, wait_until="domcontentloaded")
            page.wait_for_function(SHOWN_OR_ENDED, timeout=TIMEOUT_MS)
            shown = page.locator(".qx-output .qx").count()
            problem = None if shown else f"a cell ran past {CELL_TIMEOUT_S} s"
        except Exception as e:  # noqa: BLE001 (said in the line below)
            problem = type(e).__name__
        if problem is None:
            print(f"{what} shown in {time.time() - t:.1f} s")
            return page
        line = (f"{what} not shown after {time.time() - t:.0f} s ({problem}) with {len(_kernels(proc))} "
                f"kernels running")
        if attempt == 2:
            raise AssertionError(f"{line}, twice; Voila's log:\n{log.read_text()[-3000:]}")
        print(f"{line}: closed and opened once more")
        page.close(run_before_unload=True)
        deadline = time.time() + 60
        while len(_kernels(proc)) > before and time.time() < deadline:
            time.sleep(0.5)


def test_explorer_app_in_chromium(chromium, stored, app):
    from playwright.sync_api import expect, sync_playwright

    name, result = stored
    url, proc, log = app
    r5 = _recalls(result, 5)
    first_subset = r5["subset"].iloc[0]
    timings: dict[str, float] = {}

    with sync_playwright() as p:
        profile = SHOTS / f".profile-{uuid.uuid4().hex[:8]}"
        ctx = _launch(p, chromium, profile)
        try:
            page = _show(ctx, url, proc, log, "the page")
            assert page.locator(".query-explorer").count() == 1, "one explorer, no second frozen copy"
            assert page.locator("[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
            assert len(_kernels(proc)) == 1
            # The first view: the first subset, opened on its largest gap, its summary from eval.runs.
            g = r5[r5["subset"] == first_subset]
            _check_query(page, result, _largest_gap(g), 5)
            summary = page.locator(".qx-count")
            expect(summary).to_contain_text(f"{len(g)} queries in {first_subset}", timeout=TIMEOUT_MS)
            assert _summary(g, 5) in summary.inner_text().replace("\xa0", " ")
            top_table = g.assign(abs_gap=g["gap"].abs(), order=range(len(g))).sort_values(
                ["abs_gap", "order"], ascending=[False, True], kind="stable")
            assert _rows(page) == top_table["query_id"].head(PAGE_ROWS).tolist()

            # Search: a query of another subset by a piece of its text, found wherever it is.
            target = r5[r5["subset"] != first_subset].iloc[3]
            words = " ".join(str(target["text"]).split()[2:7])
            hits = r5[r5["text"].str.lower().str.contains(words.lower(), regex=False)]
            box = page.locator(".qx-search input")
            box.fill(words)
            timings["search"] = _timed(page, lambda: box.press("Enter"), SHOWS,
                                       [".qx-count", f"matching “{words}”"])
            best = _largest_gap(hits)  # the search opens on its largest gap too
            expect(page.locator(".qx-output h3").first).to_contain_text(
                f"query {hits.set_index('qkey').loc[best, 'query_id']} ({_head(result)}", timeout=TIMEOUT_MS)
            assert target["query_id"] in _rows(page) and len(_rows(page)) == len(hits)
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / "explorer_search.png"), full_page=False)
            box.fill("")
            timings["clear search"] = _timed(page, lambda: box.press("Enter"), SHOWS,
                                             [".qx-count", f"queries in {first_subset}"])

            # Subset and filter: PtR's wins of the subset with the most.
            wins = r5[r5["b"] > r5["a"]]
            subset = wins["subset"].value_counts().index[0]
            mine = wins[wins["subset"] == subset]
            timings["subset"] = _timed(page, lambda: _select(page, "subset", subset), SHOWS,
                                       [".qx-count", f"queries in {subset}"])
            timings["filter"] = _timed(page, lambda: _select(page, "filter", "PtR higher recall"), SHOWS,
                                       [".qx-count", f"{len(mine)} quer"])
            assert _summary(mine, 5) in summary.inner_text().replace("\xa0", " ")
            _check_query(page, result, _largest_gap(mine), 5)

            # Sort by PtR's recall (largest first, ties in study order), then the other way.
            by_ptr = mine.assign(order=range(len(mine))).sort_values(["b", "order"], ascending=[False, True],
                                                                     kind="stable")
            ids = by_ptr["query_id"].head(PAGE_ROWS).tolist()
            header = page.locator(".qx-sort-b")
            timings["sort"] = _timed(page, header.click, ROWS_ARE, ids)
            expect(header).to_contain_text("▼")
            asc = mine.assign(order=range(len(mine))).sort_values(["b", "order"], ascending=[True, True],
                                                                  kind="stable")["query_id"].head(PAGE_ROWS)
            timings["sort again"] = _timed(page, header.click, ROWS_ARE, asc.tolist())
            timings["sort back"] = _timed(page, header.click, ROWS_ARE, ids)
            page.locator(".qx-table").screenshot(path=str(SHOTS / "explorer_sorted_table.png"))

            # A row's button shows its query.
            pick = by_ptr.iloc[min(1, len(by_ptr) - 1)]
            button = page.locator(".qx-row button", has_text=str(pick["query_id"])).first
            timings["row"] = _timed(page, button.click, SHOWS,
                                    [".qx-output h3", f"query {pick['query_id']} ({_head(result)}"])
            _check_query(page, result, pick["qkey"], 5)

            # k = 10: the view is scored again; the query stays while it passes the filter.
            r10 = _recalls(result, 10)
            mine10 = r10[(r10["subset"] == subset) & (r10["b"] > r10["a"])]
            timings["k"] = _timed(page, lambda: _set_k(page, 10), SHOWS,
                                  [".qx-count", f"mean recall@10: RtP {mine10['a'].mean():.3f}"])
            if pick["qkey"] in set(mine10["qkey"]):
                _check_query(page, result, pick["qkey"], 10)

            # The method pair swapped: PtR as A, RtP as B; the filter keeps its key (B wins: now RtP's).
            timings["method A"] = _timed(page, lambda: _select(page, "method-a", "PtR"), SHOWS,
                                         [".qx-sort-a", "PtR R@10"])
            timings["method B"] = _timed(page, lambda: _select(page, "method-b", "RtP"), SHOWS,
                                         [".qx-sort-b", "RtP R@10"])
            swapped = r10[(r10["subset"] == subset) & (r10["a"] > r10["b"])]  # RtP ahead of PtR
            expect(summary).to_contain_text(f"mean recall@10: PtR {swapped['b'].mean():.3f}, RtP "
                                            f"{swapped['a'].mean():.3f}", timeout=TIMEOUT_MS)
            page.wait_for_selector(".qx .col", timeout=TIMEOUT_MS)  # the rows render after the summary line
            overflow = page.evaluate("() => [...document.querySelectorAll('.qx .col')]"
                                     ".map(c => c.scrollWidth - c.clientWidth)")
            assert overflow and max(overflow) <= 0, f"a column overflows (long ids must wrap): {overflow}"

            # The view's link: the address follows it, and a second page opened on it shows the same view.
            link = page.locator(".qx-permalink").get_attribute("href")
            assert link.startswith("?") and "k=10" in link and "a=ptr" in link and f"subset={subset}" in link
            page.wait_for_function("(q) => window.location.search === q", arg=link, timeout=TIMEOUT_MS)
            shown = {"rows": _rows(page), "summary": summary.inner_text(),
                     "query": page.locator(".qx-output").inner_text()}
            second = _show(ctx, url + link, proc, log, "the link's page")
            expect(second.locator(".qx-count")).to_contain_text("mean recall@10: PtR", timeout=TIMEOUT_MS)
            assert {"rows": _rows(second), "summary": second.locator(".qx-count").inner_text(),
                    "query": second.locator(".qx-output").inner_text()} == shown
            assert second.locator(".qx-permalink").get_attribute("href") == link
            second.close()
        finally:
            ctx.close()
            shutil.rmtree(profile, ignore_errors=True)
    for shot in ("explorer_search.png", "explorer_sorted_table.png"):
        data = (SHOTS / shot).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, shot
    print("seconds per change: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()))
    slow = {k: round(v, 2) for k, v in timings.items() if v >= MAX_CHANGE_S}
    assert not slow, f"changes slower than {MAX_CHANGE_S} s: {slow}"

    deadline = time.time() + 180  # the closed pages' kernels are culled once idle
    while _kernels(proc) and time.time() < deadline:
        time.sleep(1)
    assert not _kernels(proc), f"the kernel of a closed page still runs:\n{log.read_text()[-2000:]}"


def test_a_page_beyond_the_limit_is_refused_in_one_line_and_a_closed_page_frees_its_kernel(app, stored,
                                                                                         tmp_path):
    """With at most one page, a second is refused (503, one line); the close beacon the page sends (its
    ``_xsrf`` cookie in the form, as Voilà's page script does) shuts the first page's kernel down at once,
    and the next page is served."""
    with serve(stored[0], tmp_path / "voila.log", max_pages=1, cull_idle_s=600) as (url, proc, log):
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        page = opener.open(url, timeout=TIMEOUT_MS / 1000).read().decode()
        assert "query-explorer" in page and len(_kernels(proc)) == 1
        xsrf = {c.name: c.value for c in jar}.get("_xsrf")
        assert xsrf, "the page set no _xsrf cookie: its close beacon would be refused"
        with pytest.raises(urllib.error.HTTPError) as refused:
            opener.open(url, timeout=60)
        line = refused.value.read().decode()
        assert refused.value.code == 503 and "serves at most 1 pages at once and 1 are open" in line
        assert len(_kernels(proc)) == 1
        kernel = json.loads(re.search(r'"kernelId": ("[0-9a-f-]+")', page).group(1))
        closed = opener.open(urllib.request.Request(
            f"{url}voila/api/shutdown/{kernel}", data=urllib.parse.urlencode({"_xsrf": xsrf}).encode()),
            timeout=60)
        assert closed.status == 204
        deadline = time.time() + 30  # at once, not culled (after 600 idle seconds)
        while _kernels(proc) and time.time() < deadline:
            time.sleep(0.5)
        assert not _kernels(proc), f"the closed page's kernel still runs:\n{log.read_text()[-2000:]}"
        assert "_xsrf" not in log.read_text()
        assert "query-explorer" in opener.open(url, timeout=TIMEOUT_MS / 1000).read().decode()


def test_six_pages_closed_in_chromium_release_their_kernels_within_a_minute(chromium, app, stored, tmp_path):
    """Six pages opened in Chromium, each kernel's resident memory printed; closed (their close beacons
    sent), every kernel is gone within 60 s, with culling set far later (600 idle seconds)."""
    from playwright.sync_api import sync_playwright

    with serve(stored[0], tmp_path / "voila.log", max_pages=6, cull_idle_s=600) as (url, proc, log), \
            sync_playwright() as p:
        profile = tmp_path / "profile"
        ctx = _launch(p, chromium, profile)
        try:
            pages = []
            for i in range(6):
                pages.append(_show(ctx, url, proc, log, f"page {i + 1} of 6"))
            kernels = _kernels(proc)
            assert len(kernels) == 6
            print("page kernels' resident memory (MiB): "
                  + ", ".join(f"{k.memory_info().rss / 2**20:.0f}" for k in kernels))
            t0 = time.time()
            for page in pages:
                page.close(run_before_unload=True)
            while _kernels(proc) and time.time() < t0 + 60:
                time.sleep(0.5)
            assert not _kernels(proc), f"kernels of closed pages still run:\n{log.read_text()[-2000:]}"
            print(f"six closed pages' kernels released in {time.time() - t0:.1f} s")
        finally:
            ctx.close()
    assert "_xsrf" not in log.read_text()
