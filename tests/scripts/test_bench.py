"""scripts/bench.py: the JSON the issue specifies, and target lines that can say MISSED."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from helpers import CONFIG_DIR

pytestmark = pytest.mark.usefixtures("single_thread")


def load(name: str):
    path = CONFIG_DIR.parent / f"scripts/{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    return load("bench")


@pytest.fixture(scope="module")
def bench_mfu():
    return load("bench_mfu")


def test_eval_rows_hold_time_memory_and_the_kernel(bench, tmp_path):
    out = tmp_path / "bench.json"
    bench.main(["--no-train", "--pes", "alibi,rope", "--lengths", "64,96", "--json", str(out)])
    written = json.loads(out.read_text())
    rows = written["eval"]
    assert [(r["pe"], r["length"]) for r in rows] == [
        ("alibi", 64), ("alibi", 96), ("rope", 64), ("rope", 96),
    ]  # fmt: skip
    for row in rows:
        assert row["impl"] == "lengen" and row["attention"] == "auto"
        assert row["seconds"] > 0 and row["peak_mem_mb"] >= 0
    assert written["train_tokens_per_s"] == {}
    assert written["machine"]["threads"] >= 1


def test_training_rows_are_keyed_by_impl_and_pe(bench, tmp_path):
    out = tmp_path / "bench.json"
    arguments = ["--no-eval", "--pes", "rope", "--impls", "lengen,plain", "--steps", "2"]
    bench.main([*arguments, "--warmup", "1", "--json", str(out)])
    speeds = json.loads(out.read_text())["train_tokens_per_s"]
    assert sorted(speeds) == ["lengen/rope", "plain/rope"]
    assert all(value > 0 for value in speeds.values())


def test_targets_name_misses_and_compare_flex_rows_with_rope(bench):
    def row(pe, seconds, attention="auto"):
        return {"pe": pe, "attention": attention, "length": 8192, "seconds": seconds,
                "peak_mem_mb": 100.0}  # fmt: skip

    results = {
        "train_tokens_per_s": {
            "lengen/alibi": 100.0,
            "x-transformers/alibi": 95.0,
            "plain/alibi": 100.0,
        },  # fmt: skip
        "eval": [row("rope", 1.0), row("alibi", 1.2), row("alibi", 4.0, "flex")],
    }
    lines = bench.targets(results, ["alibi", "rope"])
    assert "train      alibi: lengen / x-transformers = 1.05 (>= 1.1) MISSED" in lines
    assert "train      alibi: lengen / plain = 1.00 (>= 0.95) ok" in lines
    assert "eval      alibi @8192: seconds / rope's = 1.20 (<= 1.5) ok" in lines
    assert "eval alibi/flex @8192: seconds / rope's = 4.00 (<= 1.5) MISSED" in lines


def test_flex_rows_only_for_relative_biases(bench):
    assert bench.eval_lengen("rope", [64], "cpu", repeats=1, attention="flex") == []


TINY = dict(vocab=32, d_model=16, n_layers=2, n_heads=2, d_ff=48, seq=12, batch=2)


def test_flops_per_token_counts_every_matmul_weight_of_the_model(bench, bench_mfu):
    # 6N + 12·L·d·T with N read off the built model: every Linear weight, nothing else
    model = bench.lengen_model("rope", TINY["seq"], sizes=TINY)
    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    attention = 12 * TINY["n_layers"] * TINY["d_model"] * TINY["seq"]
    assert bench_mfu.training_flops_per_token(TINY) == 6 * weights + attention


def test_mfu_sizes_are_about_100m_parameters(bench, bench_mfu):
    model = bench.lengen_model("rope", 16, sizes=bench_mfu.MFU_SIZES)
    assert 90e6 < sum(p.numel() for p in model.parameters()) < 110e6


def test_mfu_row_on_cpu_has_no_data_sheet_peak(bench_mfu):
    row = bench_mfu.measure_mfu("rope", torch.device("cpu"), warmup=1, steps=2, sizes=TINY)
    assert row["precision"] == "32-true" and row["mfu"] is None
    assert row["tokens_per_s"] > 0 and row["mfu_vs_matmul_peak"] > 0


@pytest.mark.parametrize(
    ("name", "peak"),
    [("NVIDIA H100 80GB HBM3", 989.4e12), ("NVIDIA H200 NVL", 835.5e12), ("NVIDIA H200", 989.4e12),
     ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA GeForce RTX 4090", None)],
)  # fmt: skip
def test_data_sheet_peak_by_device_name(bench_mfu, monkeypatch, name, peak):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    assert bench_mfu.spec_peak(torch.device("cuda")) == peak


def test_the_ladder_adds_one_change_per_rung_and_reports_each_gain(bench_mfu, monkeypatch):
    seen = []

    def fake(name, device, warmup, steps, sizes, compile, fused, peaks):
        seen.append((sizes["batch"], compile, fused))
        speed = 100.0 * len(seen)
        return {"tokens_per_s": speed, "mfu": speed / 1000, "mfu_vs_matmul_peak": 0.5,
                "sizes": sizes}  # fmt: skip

    monkeypatch.setattr(bench_mfu, "measure_mfu", fake)
    monkeypatch.setattr(bench_mfu, "device_batch", lambda device, sizes: 64)
    monkeypatch.setattr(bench_mfu, "matmul_peak", lambda device, dtype: 1.0)
    result = bench_mfu.ladder(torch.device("cpu"), warmup=1, steps=2, sizes=TINY)
    assert seen == [(TINY["batch"], False, False), (64, False, False), (64, False, True),
                    (64, True, True)]  # fmt: skip
    assert [r["gain"] for r in result["rungs"]] == [None, 2.0, 1.5, round(4 / 3, 3)]
    assert result["best"] == "+compile" and result["mfu"] == 0.4 and result["met"] is True


def test_the_device_batch_fits_the_memory_estimate_in_60_percent(bench_mfu, monkeypatch):
    class Properties:
        total_memory = 80 * 2**30

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: Properties())
    batch = bench_mfu.device_batch(torch.device("cuda"))
    sizes = {**bench_mfu.MFU_SIZES, "batch": batch}
    assert bench_mfu.training_bytes(sizes) <= 0.6 * Properties.total_memory
    assert batch == 64 or bench_mfu.training_bytes({**sizes, "batch": 2 * batch}) > 48 * 2**30


def test_gpu_targets_ask_for_0_9_of_the_plain_loop_for_every_lengen_variant(bench):
    results = {
        "machine": {"device": "cuda"},
        "train_tokens_per_s": {"lengen/rope": 85.0, "lengen-compile/rope": 95.0,
                               "plain/rope": 100.0},
        "eval": [],
    }  # fmt: skip
    lines = bench.targets(results, ["rope"])
    assert lines == [
        "train       rope: lengen / plain = 0.85 (>= 0.9) MISSED",
        "train       rope: lengen-compile / plain = 0.95 (>= 0.9) ok",
    ]
