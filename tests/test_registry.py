import json
import logging

from toolbench_lib.data.queries import load_queries
from toolbench_lib.data.registry import DOC_TEXT_MAX_CHARS, api_text, merge_registry, parse_corpus_text


def test_merge_order_and_rules(mini_toolbench, caplog):
    with caplog.at_level(logging.WARNING):
        reg, stats = merge_registry(mini_toolbench)
    # malformed tool file and corpus line are skipped, counted and warned about
    assert len(stats.malformed_files) == 2
    assert any("broken.json" in r.getMessage() for r in caplog.records)
    assert stats.duplicate_api_names == 1
    by_source = reg["source"].value_counts().to_dict()
    # toolenv: weather 2 + shazam 1 + shazam 1 + yahoo 1
    assert by_source["toolenv"] == 5
    # query docs add only the renamed forecast API and Old Tool/Legacy; Yahoo Finance_v2 Get-Quote exists
    assert by_source["query_api_list"] == 2
    # 2023 adds "Extra" only (Legacy came first from the query docs)
    assert by_source["toolenv_2023"] == 1
    # corpus adds the cocktail API; Weather Now/Forecast already exists
    assert by_source["retrieval_corpus"] == 1
    assert len(reg) == 9
    # tools sharing a display name stay distinct and keep their own ids
    shazam = reg[reg["norm_tool"] == "shazamapi"]
    assert len(shazam) == 2 and shazam["api_id"].is_unique
    assert set(shazam["tool_key"]) == {"shazamapi", "shazam_api"}
    assert reg["api_id"].is_unique
    legacy = reg[reg["api_name"] == "Legacy"].iloc[0]
    assert legacy["source"] == "query_api_list"
    extra = reg[reg["api_name"] == "Extra"].iloc[0]
    assert extra["method"] == "POST" and extra["category"] == "Finance"


def test_ids_are_stable(mini_toolbench):
    a, _ = merge_registry(mini_toolbench)
    b, _ = merge_registry(mini_toolbench)
    assert a["api_id"].tolist() == b["api_id"].tolist()
    assert "Weather/weather_now/currentweather" in set(a["api_id"])


def test_ground_truth_resolution(mini_toolbench):
    reg, _ = merge_registry(mini_toolbench)
    q = load_queries(mini_toolbench, ["G1"], reg)
    assert q["unresolved_candidates"].sum() == 0 and q["unresolved_relevant"].sum() == 0
    first = q.iloc[0]
    assert first["relevant"] == ["Weather/weather_now/currentweather", first["candidates"][1]]
    assert set(first["relevant"]) <= set(first["candidates"])
    # the _v2 suffix resolves to the registry tool without it
    assert q.iloc[1]["relevant"] == ["Finance/yahoo_finance/getquote"]


def test_unresolved_pairs_are_counted(mini_toolbench):
    reg, _ = merge_registry(mini_toolbench)
    reg = reg[reg["api_name"] != "Legacy"]
    q = load_queries(mini_toolbench, ["G1"], reg)
    assert q["unresolved_candidates"].sum() == 1


def test_api_text():
    row = {"tool_name": "Weather Now", "category": "Weather_Data", "tool_description": "Current  weather.",
           "api_name": "Forecast", "api_description": "Five-day\nforecast",
           "required_parameters": json.dumps([{"name": "city"}]),
           "optional_parameters": json.dumps([{"name": "units"}])}
    assert api_text(row) == ("Weather Now (Weather Data): Current weather. | Forecast: Five-day forecast | "
                             "parameters: city, units")
    row["api_description"] = "x " * 5000
    assert len(api_text(row)) == DOC_TEXT_MAX_CHARS
    assert api_text(row).startswith("Weather Now (Weather Data)")


def test_parse_corpus_text():
    doc = parse_corpus_text("category_name:Food, tool_name:A, B, api_name:List, api_description:d, e, "
                            "required_params: [{\"name\": \"id\"}], optional_params: [], return_schema: {}")
    assert doc["tool_name"] == "A, B" and doc["api"]["description"] == "d, e"
    assert doc["required"] == [{"name": "id"}]
    assert parse_corpus_text("nonsense") is None


def test_shipped_data(ds):
    """The merged registry and query sets of the shipped data."""
    from toolbench_lib.data.dataset import summary

    s = summary(ds)
    assert 47_200 <= s["apis"] <= 47_700
    assert s["categories"] == 49
    assert s["unresolved_gt_pairs"] == 0
    assert s["gt_pairs_relevant"] == 2599
    assert s["subsets"]["G1_instruction"] == 163
    assert s["subsets"]["G2_category_original"] == 199
    assert s["subsets"]["G3_instruction_original"] == 100
    assert len(s["subsets"]) == 8
    assert abs(s["mean_gt_size"]["candidates"]["G1_instruction"] - 5.3) < 0.05
    assert abs(s["mean_gt_size"]["candidates"]["G2_instruction"] - 6.5) < 0.05
    q = ds.queries
    assert all(set(r) <= set(c) for r, c in zip(q["relevant"], q["candidates"], strict=True))
    assert q["relevant"].map(len).sum() < q["candidates"].map(len).sum()
