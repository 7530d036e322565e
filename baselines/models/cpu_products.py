"""Which library multiplies the baselines' matrices on a CPU: torch's BLAS or oneDNN.

``torch.addmm`` sends float32 products to torch's BLAS (MKL in the x86 wheels) and bfloat16
ones to oneDNN. oneDNN's linear (the private operators :data:`PRIVATE_ONEDNN_OPS`, what Inductor
uses for frozen linears) can take float32 products too, from a weight reordered once into its
blocked layout (:class:`RepeatedMatmul`, the recurrent matmul of every step) or from the weight as
it is (:func:`affine`, a product used once).

Which is faster depends on the CPU (docs/measurements.md):

- on an Intel Xeon, MKL's float32 products of one or two rows took 0.7-0.9 of the prepacked
  product's time, and the prepacked one won from four rows up;
- on an AMD EPYC, for weights from 1600 x 400 up, oneDNN took 0.1-0.9 of MKL's time on two
  threads (0.5-1.06 on one), about half for the two products that batch-1 evaluation spends most
  on: the 2 x 650 LSTM's recurrent matmul of one row and the WikiText-2 decoder's of a chunk.
  For the smallest weights its cost per call outweighs that: the ``tiny`` preset's recurrent
  matmul (256 x 64, one row) took 3.4-4.5 times MKL's time.

So float32 products go to oneDNN on the vendors of :data:`ONEDNN_FLOAT32_VENDORS` (for weights of
at least :attr:`CpuProducts.onednn_float32_min_weight` elements), and elsewhere to torch's BLAS
(unless a product is repeated over more than :attr:`CpuProducts.float32_plain_rows` rows). The
two libraries round differently (last bits of float32), but every product of a process is taken
by the same one, so a model's scores are reproducible as the harness's causality audit requires.
"""

from __future__ import annotations

import functools
import sys

import torch
from torch import Tensor

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
    #: Even there, the products of a float32 weight of fewer elements take ``torch.addmm``, where
    #: oneDNN's 12-16 us more on each call outweigh its speed (from 1600 x 400 up they do not).
    onednn_float32_min_weight = 1 << 19
    #: Where oneDNN does not take a weight's float32 products, :class:`RepeatedMatmul`'s of up to
    #: this many rows take ``torch.addmm`` (batch-1 evaluation); 0 prepacks every batch size.
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
    weights of at least :attr:`CpuProducts.onednn_float32_min_weight` elements."""
    chosen = CpuProducts.onednn_float32
    return cpu_vendor() in ONEDNN_FLOAT32_VENDORS if chosen is None else chosen


def _onednn_float32_for(weight: Tensor) -> bool:
    """Whether oneDNN takes float32 products with ``weight`` (by the CPU and the weight's size)."""
    return onednn_float32() and weight.numel() >= CpuProducts.onednn_float32_min_weight


@functools.cache
def onednn_usable() -> bool:
    """Whether this torch has :data:`PRIVATE_ONEDNN_OPS` and they pass a self-check
    (:func:`_onednn_unusable`). Decided once per process; when not, a one-line notice on stderr
    says why and that ``torch.addmm`` takes every product instead (same results, slower)."""
    reason = _onednn_unusable()
    if reason is not None:
        print(f"note: {reason}; matrix products use torch.addmm instead (slower)", file=sys.stderr)
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


def _onednn_takes(weight: Tensor) -> bool:
    """Whether oneDNN may multiply by ``weight``: on a CPU, float32 or (natively supported)
    bfloat16, with the operators usable and :attr:`CpuProducts.use_onednn` on."""
    if weight.device.type != "cpu" or weight.dtype not in (torch.float32, torch.bfloat16):
        return False
    if not (CpuProducts.use_onednn and onednn_usable()):
        return False
    return weight.dtype == torch.float32 or torch.ops.mkldnn._is_mkldnn_bf16_supported()


def affine(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    """``bias + x @ weight^T`` for ``x`` ``[N, I]``, ``weight`` ``[O, I]``, ``bias`` ``[O]`` ->
    ``[N, O]``, with no autograd.

    float32 on a CPU where oneDNN takes float32 products (:func:`onednn_float32`), with a weight
    large enough, goes to oneDNN's linear on the weight as it is (reordering it would cost more
    than a product used once: 34 ms for the WikiText-2 decoder, whose product takes 23 ms);
    anything else to ``torch.addmm``."""
    float32 = all(operand.dtype == torch.float32 for operand in (x, weight, bias))
    if float32 and _onednn_float32_for(weight) and _onednn_takes(weight):
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), weight.contiguous(), bias, "none", [], "")
    return torch.addmm(bias, x, weight.t())


def _prepacks(weight: Tensor, rows: int) -> bool:
    """Whether :class:`RepeatedMatmul` reorders ``weight`` for oneDNN, for products of ``rows``
    rows."""
    if not _onednn_takes(weight):
        return False
    return (
        weight.dtype != torch.float32 or _onednn_float32_for(weight) or rows > CpuProducts.float32_plain_rows
    )


class RepeatedMatmul:
    """``add + x @ weight^T`` for many ``x`` and one ``weight`` ``[out, in]`` (the recurrent
    matmul of every step of a chunk): ``x`` ``[rows, in]``, ``add`` None or ``[rows, out]``.

    On a CPU the weight is reordered once into oneDNN's blocked layout and every product uses it:
    1.6-1.9x faster than ``torch.addmm`` for the training batch (``benchmarks/baselines_speed.py``),
    where the private operators pass their self-check (:func:`onednn_usable`). Elsewhere, for
    float64, and for float32 products of at most :attr:`CpuProducts.float32_plain_rows` rows
    unless oneDNN takes this weight's float32 products (:func:`onednn_float32`), a plain
    ``torch.addmm``.
    """

    def __init__(self, weight: Tensor, rows: int) -> None:
        self.weight = weight
        packs = _prepacks(weight, rows)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, None) if packs else None

    def __call__(self, x: Tensor, add: Tensor | None = None) -> Tensor:
        if self.packed is None:
            return x @ self.weight.t() if add is None else torch.addmm(add, x, self.weight.t())
        if add is None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")
        return torch.ops.mkldnn._linear_pointwise.binary(x, add, self.packed, None, "add")
