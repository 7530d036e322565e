"""Which library multiplies on a CPU (:mod:`baselines.models.cpu_products`): oneDNN's linear,
prepacked or on the weight as it is, against ``torch.addmm``; the choice by the CPU's vendor; the
fallback where oneDNN's private operators are missing or wrong."""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from baselines.models import CoreConfig, PointerConfig, PointerSentinelLSTM, ZoneoutLSTM, cpu_products
from baselines.models.cpu_products import (
    CpuProducts,
    RepeatedMatmul,
    affine,
    cpu_vendor,
    onednn_usable,
    product_library,
)
from baselines.models.recurrent import ZoneoutLSTMLayer
from baselines.plugin_bridge import TorchLanguageModel
from harness.evaluate import evaluate

#: Runs a test with each library taking float32 products (the ``onednn_float32`` fixture).
BOTH_LIBRARIES = pytest.mark.parametrize(
    "onednn_float32", [False, True], indirect=True, ids=["blas-float32", "onednn-float32"]
)


def _onednn_here() -> bool:
    return torch.backends.mkldnn.is_available() and onednn_usable()


@pytest.fixture
def onednn_float32(monkeypatch, request) -> bool:
    """The test's :attr:`CpuProducts.onednn_float32` (from its parameter), for products of any size
    (the tests' are small)."""
    monkeypatch.setattr(CpuProducts, "onednn_float32", request.param)
    monkeypatch.setattr(CpuProducts, "onednn_float32_min_work", 0)
    return request.param


def test_the_vendor_is_read_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert cpu_vendor(str(cpuinfo)) == "AuthenticAMD"
    (tmp_path / "arm").write_text("processor\t: 0\nBogoMIPS\t: 50.00\n")
    assert cpu_vendor(str(tmp_path / "arm")) == ""
    assert cpu_vendor(str(tmp_path / "missing")) == ""


@pytest.mark.parametrize(
    ("vendor", "chosen", "expected"),
    [
        ("AuthenticAMD", None, True),
        ("GenuineIntel", None, False),
        ("", None, False),
        ("GenuineIntel", True, True),
        ("AuthenticAMD", False, False),
    ],
)
def test_onednn_takes_float32_products_on_amd_cpus_unless_told(monkeypatch, vendor, chosen, expected):
    monkeypatch.setattr(cpu_products, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(CpuProducts, "onednn_float32", chosen)
    assert cpu_products.onednn_float32() is expected


@pytest.mark.parametrize(
    ("onednn", "shape", "rows", "once", "expected"),
    [
        (True, (1024, 512), 2, True, "onednn"),  # 2^20 multiply-adds
        (True, (1024, 512), 2, False, "prepacked"),
        (True, (1024, 512), 1, True, "addmm"),
        (True, (1024, 512), 1, False, "addmm"),
        (True, (64, 64), 32, False, "addmm"),
        (True, (64, 64), 256, False, "prepacked"),
        (False, (1024, 512), 100, True, "addmm"),
        (False, (1024, 512), 2, False, "addmm"),
        (False, (1024, 512), 3, False, "prepacked"),
        (False, (64, 64), 3, False, "prepacked"),
    ],
)
def test_which_library_takes_a_product(monkeypatch, onednn, shape, rows, once, expected):
    if not _onednn_here():
        pytest.skip("no usable private oneDNN operators: every product is torch.addmm")
    monkeypatch.setattr(CpuProducts, "onednn_float32", onednn)
    assert product_library(torch.empty(shape), rows, once) == expected
    assert product_library(torch.empty(shape, dtype=torch.float64), rows, once) == "addmm"
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        bfloat16 = "addmm" if once else "prepacked"  # oneDNN's inside torch.addmm too
        assert product_library(torch.empty(shape, dtype=torch.bfloat16), rows, once) == bfloat16
    monkeypatch.setattr(CpuProducts, "use_onednn", False)
    assert product_library(torch.empty(shape), rows, once) == "addmm"


def _count_calls(monkeypatch) -> list[tuple]:
    """Record the arguments of every call of oneDNN's ``_linear_pointwise`` (and still run it)."""
    calls: list[tuple] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", counted)
    return calls


@BOTH_LIBRARIES
def test_affine_takes_onednn_only_where_chosen_with_torch_addmms_results(monkeypatch, onednn_float32):
    if not _onednn_here():
        pytest.skip("no usable private oneDNN operators: every product is torch.addmm")
    torch.manual_seed(0)
    x, weight, bias = torch.randn(5, 7), torch.randn(11, 7), torch.randn(11)
    calls = _count_calls(monkeypatch)
    got = affine(x, weight, bias)
    assert len(calls) == int(onednn_float32)
    if onednn_float32:
        assert calls[0][1] is weight  # the weight as it is: no reordering for one product
        torch.testing.assert_close(got, torch.addmm(bias, x, weight.t()))
    else:
        assert torch.equal(got, torch.addmm(bias, x, weight.t()))
    affine(x.double(), weight.double(), bias.double())  # float64: torch.addmm
    affine(x.bfloat16(), weight.bfloat16(), bias.bfloat16())  # bfloat16: torch.addmm (oneDNN inside)
    assert len(calls) == int(onednn_float32)


@BOTH_LIBRARIES
def test_affine_multiplies_by_the_weight_as_it_is_now(onednn_float32):
    """Dynamic evaluation moves the weights in place between products: nothing may be cached."""
    torch.manual_seed(0)
    x, weight, bias = torch.randn(5, 7), torch.randn(11, 7), torch.randn(11)
    affine(x, weight, bias)
    weight.mul_(-0.5).add_(1.0)
    bias.add_(3.0)
    torch.testing.assert_close(affine(x, weight, bias), torch.addmm(bias, x, weight.t()))


def test_small_float32_products_stay_with_torch_addmm_where_onednn_takes_the_large(monkeypatch):
    if not _onednn_here():
        pytest.skip("no usable private oneDNN operators: every product is torch.addmm")
    monkeypatch.setattr(CpuProducts, "onednn_float32", True)
    weight = torch.randn(CpuProducts.onednn_float32_min_work // 1024, 512)  # 2 rows: the least work
    calls = _count_calls(monkeypatch)
    for rows, taken in ((1, 0), (2, 1)):
        affine(torch.randn(rows, 512), weight, torch.zeros(weight.shape[0]))
        assert len(calls) == taken
        assert (RepeatedMatmul(weight, rows).packed is not None) == bool(taken)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_prepacked_recurrent_matmul_equals_the_plain_one(monkeypatch, dtype):
    torch.manual_seed(0)
    weight, x, add = torch.randn(12, 5), torch.randn(3, 5), torch.randn(3, 12)
    weight, x, add = weight.to(dtype), x.to(dtype), add.to(dtype)
    fast = RepeatedMatmul(weight, 3)
    monkeypatch.setattr(CpuProducts, "use_onednn", False)
    plain = RepeatedMatmul(weight, 3)
    assert plain.packed is None
    tolerance = {"atol": 0.05, "rtol": 0.02} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(fast(x, add=add), plain(x, add=add), **tolerance)
    torch.testing.assert_close(fast(x), plain(x), **tolerance)


def _layer_run(layer: ZoneoutLSTMLayer, batch: int = 3) -> list[torch.Tensor]:
    """A training-mode forward pass of ``layer`` (fixed input, state and masks) and the gradients
    of its parameters."""
    torch.manual_seed(1)
    x, state = torch.randn(batch, 7, 6), (torch.randn(batch, 8), torch.randn(batch, 8))
    outputs, _ = layer(x, state, 0.2, 0.2, torch.Generator().manual_seed(4))
    return [outputs, *torch.autograd.grad(outputs.square().sum(), list(layer.parameters()))]


@BOTH_LIBRARIES
@pytest.mark.parametrize("batch", [1, 3])
def test_a_layer_trains_alike_with_and_without_onednn(monkeypatch, onednn_float32, batch):
    layer = ZoneoutLSTMLayer(6, 8)
    fast = _layer_run(layer, batch)
    monkeypatch.setattr(CpuProducts, "use_onednn", False)
    for ours, plain in zip(fast, _layer_run(layer, batch)):
        torch.testing.assert_close(ours, plain)


class _WrongLinear:
    """A private oneDNN linear that runs but gives wrong numbers (zeros)."""

    def __call__(self, x, weight, *args):
        return torch.zeros(x.shape[0], weight.shape[0])

    def binary(self, x, add, packed, *args):
        return torch.zeros_like(add)


@BOTH_LIBRARIES
@pytest.mark.parametrize(
    ("operators", "notice"),
    [
        ({}, "lacks the private oneDNN operators _reorder_linear_weight, _linear_pointwise"),
        (
            {
                "_reorder_linear_weight": lambda weight, bias: weight,
                "_linear_pointwise": _WrongLinear(),
                "_is_mkldnn_bf16_supported": lambda: False,
            },
            "the private oneDNN operators disagree with torch.addmm in a self-check",
        ),
    ],
    ids=["ops-missing", "ops-wrong"],
)
def test_without_usable_private_onednn_ops_the_plain_path_runs_after_a_notice(
    monkeypatch, caplog, onednn_float32, operators, notice
):
    torch.manual_seed(0)
    layer = ZoneoutLSTMLayer(6, 8)
    onednn_usable.cache_clear()
    fast = _layer_run(layer)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(torch.ops, "mkldnn", types.SimpleNamespace(**operators))
            onednn_usable.cache_clear()
            plain = _layer_run(layer)
            _layer_run(layer, batch=1)  # decided once: one notice
            assert RepeatedMatmul(layer.weight_hh.detach(), 3).packed is None
    finally:
        onednn_usable.cache_clear()
    (err,) = caplog.messages  # decided once: one notice
    assert err.startswith("note: ") and notice in err, err
    assert "matrix products use torch.addmm instead" in err
    for ours, plain_result in zip(fast, plain):
        torch.testing.assert_close(ours, plain_result)


def test_only_a_product_meant_for_onednn_checks_its_operators(monkeypatch, caplog):
    monkeypatch.setattr(CpuProducts, "onednn_float32", False)
    weight = torch.randn(8, 4)
    try:
        with monkeypatch.context() as patched:
            patched.setattr(torch.ops, "mkldnn", types.SimpleNamespace())
            onednn_usable.cache_clear()
            assert RepeatedMatmul(weight, 1).packed is None  # torch.addmm by choice: no check
            assert affine(torch.randn(2, 4), weight, torch.zeros(8)).shape == (2, 8)
            assert caplog.text == ""
            assert RepeatedMatmul(weight, 3).packed is None  # meant for oneDNN: checked, refused
            assert "lacks the private oneDNN operators" in caplog.text
    finally:
        onednn_usable.cache_clear()


def test_the_fast_path_is_taken_where_the_private_ops_pass_their_self_check(monkeypatch, caplog):
    monkeypatch.setattr(CpuProducts, "onednn_float32_min_work", 0)
    onednn_usable.cache_clear()
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    assert onednn_usable()
    assert RepeatedMatmul(torch.randn(8, 4), 3).packed is not None
    assert caplog.text == ""


@BOTH_LIBRARIES
@pytest.mark.parametrize("batch", [1, 2, 3])
def test_small_float32_batches_prepack_only_where_onednn_takes_float32(monkeypatch, onednn_float32, batch):
    if not _onednn_here():
        pytest.skip("no usable private oneDNN operators: every product is plain")
    weight = torch.randn(8, 4)
    plain = batch <= CpuProducts.float32_plain_rows and not onednn_float32
    assert (RepeatedMatmul(weight, batch).packed is None) == plain
    assert RepeatedMatmul(weight.bfloat16(), 1).packed is not None  # bfloat16 prepacks at any batch
    monkeypatch.setattr(CpuProducts, "float32_plain_rows", 0)
    assert RepeatedMatmul(weight, 1).packed is not None


def _model(kind: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "pointer":
        return PointerSentinelLSTM(PointerConfig(vocab_size=40, embedding_size=12, hidden_size=16, window=20))
    return ZoneoutLSTM(CoreConfig(vocab_size=40, embedding_size=12, hidden_size=16))


@pytest.mark.parametrize("kind", ["lstm", "pointer"])
def test_models_score_alike_with_either_library_and_pass_the_causality_audit_exactly(monkeypatch, kind):
    """float32 at batch 1 under the harness's default protocol (chunks of 100, the causality
    audit with no tolerance on a CPU), every product by oneDNN and then by torch's BLAS."""
    ids = np.random.default_rng(3).integers(1, 40, size=450).astype(np.int64)
    monkeypatch.setattr(CpuProducts, "onednn_float32_min_work", 0)
    scores = []
    for chosen in (True, False):
        monkeypatch.setattr(CpuProducts, "onednn_float32", chosen)
        model = _model(kind)
        result = evaluate(TorchLanguageModel(model, "cpu"), ids, eos_id=0, vocab_size=40, progress=False)
        assert result.causality.passed and result.causality.max_difference == 0.0
        scores.append(result.token_log_probs)
    np.testing.assert_allclose(scores[0], scores[1], rtol=0, atol=1e-5)
