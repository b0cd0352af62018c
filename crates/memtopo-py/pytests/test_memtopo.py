"""Tests of the memtopo Python module against real and illustrative results."""

import json
import pathlib

import pytest

import memtopo

ROOT = pathlib.Path(__file__).resolve().parents[3]
H100 = ROOT / "crates/topology/tests/data/h100-result.json"
H100_AGAIN = ROOT / "crates/topology/tests/data/h100-result-second-run.json"
ILLUSTRATIVE_JSON = ROOT / "crates/topology/examples/data/h200-illustrative.json"
ILLUSTRATIVE_TOML = ROOT / "crates/topology/examples/data/h200-illustrative.toml"


def test_a_real_h100_result_loads_into_typed_objects():
    topo = memtopo.load(H100)
    assert topo.device["name"] == "NVIDIA H100 80GB HBM3"
    assert topo.device["compute_capability"] == {"major": 9, "minor": 0}
    l1 = topo.elements["l1_data"]
    assert isinstance(l1, memtopo.Element)
    assert l1.size.value == 246_784 and l1.size.bound == "exact"
    assert l1.size.text == "241 KiB"
    assert 0 < l1.size.p_value < 1e-6
    assert l1.line_size.value == 128
    assert sorted(l1.shared_with) == ["read_only", "texture"]
    l15 = topo.elements["constant_l15"]
    assert l15.size.bound == "at_least"
    # A 1.3 result has no quartiles: the median stands alone.
    latency = topo.elements["l1_data"].latency
    assert latency.p50 == 34.0 and latency.p25 is None and latency.iqr() is None
    assert latency.median_ns == pytest.approx(34.0 / 1980.0 * 1000.0)
    assert topo.run["gpu_uuid"].startswith("GPU-")


def test_json_and_toml_give_the_same_result():
    a = memtopo.load(ILLUSTRATIVE_JSON)
    b = memtopo.load(ILLUSTRATIVE_TOML)
    assert a == b
    assert memtopo.loads(a.to_toml(), format="toml") == a
    assert memtopo.loads(a.to_json()) == a
    assert a.schema_version == memtopo.SCHEMA_VERSION


def test_records_are_flat_and_complete():
    topo = memtopo.load(ILLUSTRATIVE_JSON)
    records = topo.to_records()
    assert [r["element"] for r in records] == list(topo.elements)
    for row in records:
        for value in row.values():
            assert value is None or isinstance(value, (int, float, str))
    l2 = next(r for r in records if r["element"] == "l2")
    assert l2["size_bytes"] == 50 * 1024 * 1024
    assert l2["latency_p25"] <= l2["latency_p50"] <= l2["latency_p75"] <= l2["latency_p95"]
    latencies = topo.latency_records()
    assert {"l2_near", "l2_far"} <= {r["element"] for r in latencies}
    carveout = topo.carveout_records()
    assert carveout and all(r["l1_bytes"] > 0 for r in carveout)


def test_records_make_a_dataframe_when_pandas_is_installed():
    pandas = pytest.importorskip("pandas")
    topo = memtopo.load(H100)
    frame = pandas.DataFrame(topo.to_records()).set_index("element")
    assert frame.loc["l2", "size_bytes"] == 50 * 1024 * 1024
    carveout = pandas.DataFrame(topo.carveout_records())
    # What the carveout splits: L1 + shared memory is one store in every configuration.
    sums = (carveout["l1_bytes"] + carveout["shared_memory_bytes"]).dropna()
    assert sums.nunique() == 1 and sums.iloc[0] == 249 * 1024


def test_bad_files_raise_a_typed_error_naming_the_field():
    text = ILLUSTRATIVE_JSON.read_text().replace('"value": 65536', '"value": 0', 1)
    with pytest.raises(memtopo.TopologyError, match="elements"):
        memtopo.loads(text)
    with pytest.raises(ValueError):
        memtopo.loads("{", format="json")
    with pytest.raises(ValueError, match="unknown format"):
        memtopo.loads("x", format="yaml")
    # A file that is not there is the built-in error, with the file name set.
    with pytest.raises(FileNotFoundError) as missing:
        memtopo.load(ROOT / "no-such-result.json")
    assert missing.value.filename.endswith("no-such-result.json")
    assert not isinstance(missing.value, memtopo.TopologyError)
    with pytest.raises(IsADirectoryError):
        memtopo.load(_a_folder_named_json())


def _a_folder_named_json():
    import tempfile

    folder = pathlib.Path(tempfile.mkdtemp()) / "folder.json"
    folder.mkdir()
    return folder


def test_load_errors_name_the_file_the_line_and_the_field(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "schema_version": "1.0",\n  "device": 7\n}\n')
    with pytest.raises(memtopo.TopologyError) as error:
        memtopo.load(broken)
    message = str(error.value)
    assert "broken.json, line 3, column" in message and "device" in message
    newer = tmp_path / "newer.json"
    newer.write_text(ILLUSTRATIVE_JSON.read_text().replace(
        '"schema_version": "%s"' % memtopo.SCHEMA_VERSION, '"schema_version": "1.99"'))
    with pytest.raises(memtopo.TopologyError, match="1.99 is newer"):
        memtopo.load(newer)


def test_diff_finds_what_differs_and_agrees_with_itself():
    a = memtopo.load(H100)
    same = memtopo.diff(a, a)
    assert same.is_empty() and not same and len(same) == 0
    changed = json.loads(a.to_json())
    changed["elements"]["l2"]["latency"]["mean"] *= 2
    changed["elements"]["l2"]["latency"]["p50"] *= 2
    changed["elements"]["l2"]["latency"]["p95"] *= 2
    d = memtopo.diff(a, memtopo.loads(json.dumps(changed)))
    assert not d.is_empty()
    assert any("l2.latency" in path for path, _, _ in d.changes)
    assert "l2.latency" in str(d)
    rows = d.to_records()
    assert rows[0]["kind"] == "difference"
    # Two runs on the same GPU: their conditions differ (date at least).
    other = memtopo.diff(a, memtopo.load(H100_AGAIN))
    assert any(path.startswith("run.") for path, _, _ in other.conditions)
    with pytest.raises(ValueError):
        memtopo.diff(a, a, sigmas=-1.0)


def test_renders():
    topo = memtopo.load(H100)
    assert "L1 data" in topo.render("table")
    assert topo.render("markdown").startswith("# Memory topology")
    assert topo.render("svg").startswith("<svg")
    html = topo.render("html")
    assert html.startswith("<!DOCTYPE html>") and "<script" not in html
    with pytest.raises(ValueError):
        topo.render("pdf")
    assert str(topo) == topo.render("table")


def test_rows_are_one_per_value_with_unit_statistic_and_provenance():
    topo = memtopo.load(H100)
    rows = topo.to_rows()
    assert rows and all(
        set(r) == {"path", "quantity", "statistic", "value", "unit", "provenance"} for r in rows
    )
    assert all(isinstance(r["value"], float) for r in rows)
    by_key = {(r["path"], r["quantity"], r["statistic"], r["unit"]): r for r in rows}
    l1 = by_key[("l1_data", "size", "value", "B")]
    assert l1["value"] == 246_784 and l1["provenance"] == "benchmark"
    assert 0 < by_key[("l1_data", "size", "p_value", "fraction")]["value"] < 1e-6
    assert by_key[("l1_data", "latency", "p50", "cycles")]["value"] == 34.0
    assert by_key[("l1_data", "latency", "p50", "ns")]["value"] == pytest.approx(34.0 / 1.98)
    assert by_key[("constant_l15", "size", "at_least", "B")]["value"] >= 65536
    assert by_key[("device", "sm_count", "value", "count")]["value"] == 132
    # The plain dict is the JSON document.
    document = topo.to_dict()
    assert document["elements"]["l1_data"]["size"]["value"] == l1["value"]
    schema = memtopo.json_schema()
    assert memtopo.SCHEMA_VERSION in schema["properties"]["schema_version"]["enum"]


def test_rows_make_a_dataframe_when_pandas_is_installed():
    pandas = pytest.importorskip("pandas")
    topo = memtopo.load(ILLUSTRATIVE_JSON)
    frame = topo.to_dataframe()
    assert list(frame.columns) == ["path", "quantity", "statistic", "value", "unit", "provenance"]
    assert len(frame) == len(topo.to_rows())
    p50 = frame[(frame.quantity == "latency") & (frame.statistic == "p50") & (frame.unit == "cycles")]
    latencies = p50.set_index("path")["value"]
    assert latencies["l1_data"] < latencies["l2"] < latencies["device_memory"]


def test_dataframe_without_pandas_says_what_to_install(monkeypatch):
    import sys

    # `None` in sys.modules makes `import pandas` fail, as where it is not installed.
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        memtopo.load(ILLUSTRATIVE_JSON).to_dataframe()
