"""A study on the registry slice stores strict and tolerant resolution; its plans re-judge exactly."""

from __future__ import annotations

import pandas as pd
import pytest

from toolbench_lib.analysis.judge import PASS_RATE_COLUMNS, pass_rate_table, plan_evidence
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.study.rejudge import rejudge
from toolbench_lib.study.result import StudySettings, run_study

from .hand_tables import with_tables


@pytest.fixture(scope="module")
def study(slice_setup):
    return run_study(slice_setup, RulesBackend(), StudySettings(runs=1, plan_limit=3), progress=False)


def test_plans_store_both_resolutions(study):
    p = study.plans
    for col in ("named_ids", "named_ids_strict", "fidelity", "fidelity_strict", "reason", "judge_version"):
        assert col in p
    assert (p["judge_version"] == "judge-v1").all()
    # The tolerant rule resolves everything the strict one does, to the same API.
    for tolerant, strict in zip(p["named_ids"], p["named_ids_strict"], strict=True):
        assert set(strict) <= set(tolerant)


def test_rejudge_with_the_same_version_reproduces_the_verdicts(study, slice_setup):
    again = rejudge(study, slice_setup, RulesBackend(), "judge-v1")
    merged = study.plans.merge(again, on=["qkey", "method", "run"], suffixes=("", "_again"))
    assert len(merged) == len(study.plans)
    assert merged["verdict"].tolist() == merged["verdict_again"].tolist()


def test_rejudge_with_v2_and_the_pass_rate_table(study, slice_setup):
    v2 = rejudge(study, slice_setup, RulesBackend(), "judge-v2", per_subset=2)
    assert len(v2) == 2 * 2 * 3 and (v2["judge_version"] == "judge-v2").all()  # methods x per_subset x sets
    ev = plan_evidence(study, registry=slice_setup.ds.registry, verdicts=v2)
    assert set(ev["evidence"]) <= {"all", "some", "none"} and len(ev) == len(v2)
    table = pass_rate_table(study, gt="relevant", registry=slice_setup.ds.registry)
    assert list(table.columns[: len(PASS_RATE_COLUMNS)]) == PASS_RATE_COLUMNS
    assert table["n_plans"].sum() == len(study.plans)
    assert table["objective_pass_rate"].between(0, 1).all()


def test_rejudge_refuses_plans_without_their_reason(study, slice_setup):
    old = with_tables(study, plans=study.plans.drop(columns=["reason"]))
    with pytest.raises(ValueError, match="reason"):
        rejudge(old, slice_setup, RulesBackend(), "judge-v2")
    assert isinstance(old.plans, pd.DataFrame)
