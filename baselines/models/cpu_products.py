"""Which library multiplies the baselines' matrices on a CPU: torch's BLAS or oneDNN.

``torch.addmm`` sends float32 products to torch's BLAS (MKL in the x86 wheels) and bfloat16
ones to oneDNN. oneDNN's linear (the private operators :data:`PRIVATE_ONEDNN_OPS`, what Inductor
uses for frozen linears) can take float32 products too, from a weight reordered once into its
blocked layout (:class:`RepeatedMatmul`, the recurrent matmul of every step) or from the weight as
it is (:func:`affine`, a product used once).

Which is faster depends on the CPU (docs/measurements.md):

- on an Intel Xeon, MKL's float32 products of one or two rows took 0.7-0.9 of the prepacked
  product's time, and the prepacked one won from four rows up;
- on an AMD EPYC, oneDNN took about half of MKL's time for the two products that batch-1
  evaluation spends most on: the 2 x 650 LSTM's recurrent matmul of one row and the WikiText-2
  decoder's of a chunk; but it spends 12-16 us more on each call, so for the smallest products
  it took up to 3.7 times MKL's time (``benchmarks/cpu_products.py``).

So on the vendors of :data:`ONEDNN_FLOAT32_VENDORS` float32 products of at least
:attr:`CpuProducts.onednn_float32_min_work` multiply-adds go to oneDNN and the others to torch's
BLAS; elsewhere float32 products go to torch's BLAS unless repeated over more than
:attr:`CpuProducts.float32_plain_rows` rows (:func:`product_library`). The two libraries round
differently (the last bits of float32), but within a process every product of a shape takes the
same one, so a model's scores are reproducible as the harness's causality audit requires.
"""

from __future__ import annotations

import functools
import logging

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

#: The private oneDNN operators of the fast paths: no public API promises them, so they are
#: checked for before any use.
PRIVATE_ONEDNN_OPS = ("_reorder_linear_weight", "_linear_pointwise", "_is_mkldnn_bf16_supported")

#: The CPU vendors (``vendor_id`` in /proc/cpuinfo) on which oneDNN takes float32 products.
ONEDNN_FLOAT32_VENDORS = frozenset({"AuthenticAMD"})


class CpuProducts:
    """Settings of the products on a CPU, as class attributes (tests and benchmarks switch them)."""

    #: False: every product is ``torch.addmm`` (the plain path the fast ones are compared with).
    use_onednn = True
    #: Whether oneDNN takes float32 products; None: decided by the CPU's vendor
    #: (:data:`ONEDNN_FLOAT32_VENDORS`).
    onednn_float32: bool | None = None
    #: There, float32 products of fewer multiply-adds (rows x the weight's elements) take
    #: ``torch.addmm`` all the same, where oneDNN's 12-16 us more on each call outweigh its speed.
    onednn_float32_min_work = 1 << 20
    #: Elsewhere, :class:`RepeatedMatmul`'s float32 products of up to this many rows take
    #: ``torch.addmm`` (batch-1 evaluation), those of more are prepacked; 0 prepacks every size.
    float32_plain_rows = 2


@functools.cache
def cpu_vendor(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's ``vendor_id`` (``GenuineIntel``, ``AuthenticAMD``) read from ``cpuinfo``, or ""
    where there is none (another system, another architecture)."""
    try:
        with open(cpuinfo, encoding="utf-8", errors="replace") as lines:
            for line in lines:
                key, _, value = line.partition(":")
                if key.strip() == "vendor_id":
                    return value.strip()
    except OSError:
        pass
    return ""


def onednn_float32() -> bool:
    """Whether oneDNN takes float32 products here (:attr:`CpuProducts.onednn_float32`), those of
    at least :attr:`CpuProducts.onednn_float32_min_work` multiply-adds."""
    chosen = CpuProducts.onednn_float32
    return cpu_vendor() in ONEDNN_FLOAT32_VENDORS if chosen is None else chosen


@functools.cache
def onednn_usable() -> bool:
    """Whether this torch has :data:`PRIVATE_ONEDNN_OPS` and they pass a self-check
    (:func:`_onednn_unusable`). Decided once per process; when not, a one-line warning in the log
    says why and that ``torch.addmm`` takes every product instead (same results, slower)."""
    reason = _onednn_unusable()
    if reason is not None:
        logger.warning("note: %s; matrix products use torch.addmm instead (slower)", reason)
    return reason is None


def _onednn_unusable() -> str | None:
    """Why oneDNN's linear cannot be used here (None: it can): oneDNN missing, an operator
    missing, or the operators failing or disagreeing with ``torch.addmm`` on small products, from
    a prepacked weight and from one as it is (drawn from a generator of its own: the global
    random state is left as it was)."""
    if not torch.backends.mkldnn.is_available():
        return "this torch has no oneDNN"
    missing = [name for name in PRIVATE_ONEDNN_OPS if not hasattr(torch.ops.mkldnn, name)]
    if missing:
        return f"torch {torch.__version__} lacks the private oneDNN operators {', '.join(missing)}"
    generator = torch.Generator().manual_seed(0)
    shapes = ((24, 16), (3, 16), (3, 24), (24,))
    weight, x, add, bias = (torch.randn(shape, generator=generator) for shape in shapes)
    try:
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)
        products = (
            torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""),
            torch.ops.mkldnn._linear_pointwise.binary(x, add, packed, None, "add"),
            torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], ""),
        )
    except Exception as error:  # any failure of a private operator means: do not use it
        return f"the private oneDNN operators failed a self-check ({type(error).__name__})"
    expected = (x @ weight.t(), torch.addmm(add, x, weight.t()), torch.addmm(bias, x, weight.t()))
    if not all(torch.allclose(got, want, rtol=1e-4, atol=1e-5) for got, want in zip(products, expected)):
        return "the private oneDNN operators disagree with torch.addmm in a self-check"
    return None


def affine(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``bias + x @ weight^T`` for ``x`` ``[N, I]``, ``weight`` ``[O, I]``, ``bias`` ``[O]`` ->
    ``[N, O]``, with no autograd.

    float32 on a CPU where oneDNN takes float32 products (:func:`onednn_float32`), for a product
    large enough (:func:`product_library`), goes to oneDNN's linear on the weight as it is
    (reordering it would cost more than a product used once: 34 ms for the WikiText-2 decoder,
    whose product takes 23 ms); anything else to ``torch.addmm``."""
    if x.dtype == bias.dtype == torch.float32 and product_library(weight, x.shape[0], once=True) == "onednn":
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight.contiguous(), bias, "none", [], "")
    return torch.addmm(bias, x, weight.t())


def product_library(weight: Tensor, rows: int, once: bool = False) -> str:
    """Which library takes products with ``weight``: ``"prepacked"`` (oneDNN, from the weight
    reordered), ``"onednn"`` (oneDNN, from the weight as it is) or ``"addmm"`` (``torch.addmm``,
    which hands bfloat16 products to oneDNN itself).

    Only a product meant for oneDNN's private operators checks them (:func:`onednn_usable`).

    Args:
        weight: ``[out, in]``.
        rows: the rows of each product.
        once: :func:`affine`'s product, used once (else :class:`RepeatedMatmul`'s).
    """
    if weight.device.type != "cpu" or not CpuProducts.use_onednn:
        return "addmm"
    if weight.dtype == torch.bfloat16:
        wanted = "addmm" if once else "prepacked"
    elif weight.dtype != torch.float32:
        wanted = "addmm"
    elif onednn_float32():
        large = rows * weight.numel() >= CpuProducts.onednn_float32_min_work
        wanted = ("onednn" if once else "prepacked") if large else "addmm"
    else:
        wanted = "prepacked" if not once and rows > CpuProducts.float32_plain_rows else "addmm"
    if wanted == "addmm" or not onednn_usable():
        return "addmm"
    if weight.dtype == torch.bfloat16 and not onednn_bfloat16():
        return "addmm"
    return wanted


def onednn_bfloat16() -> bool:
    """Whether oneDNN multiplies bfloat16 natively on this CPU (not on x86 without AVX-512, as
    torch's private ``_is_mkldnn_bf16_supported`` reads it), asked only where the private
    operators pass :func:`onednn_usable`'s check; False where they do not."""
    return onednn_usable() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


class RepeatedMatmul:
    """``add + x @ weight^T`` for many ``x`` and one ``weight`` ``[out, in]`` (the recurrent
    matmul of every step of a chunk): ``x`` ``[rows, in]``, ``add`` None or ``[rows, out]``.

    On a CPU the weight is reordered once into oneDNN's blocked layout and every product uses it:
    1.6-1.9x faster than ``torch.addmm`` for the training batch (``benchmarks/baselines_speed.py``),
    where the private operators pass their self-check (:func:`onednn_usable`). Elsewhere, for
    float64, and for the float32 products that :func:`product_library` leaves to torch's BLAS
    (small ones, or of few rows on a CPU where oneDNN does not take float32 products), a plain
    ``torch.addmm``.
    """

    def __init__(self, weight: Tensor, rows: int) -> None:
        self.weight = weight
        packs = product_library(weight, rows) == "prepacked"
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, None) if packs else None

    def __call__(self, x: Tensor, add: Tensor | None = None) -> Tensor:
        if self.packed is None:
            return x @ self.weight.t() if add is None else torch.addmm(add, x, self.weight.t())
        if add is None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
        return torch.ops.mkldnn._linear_pointwise.binary(x, add, self.packed, None, "add")
