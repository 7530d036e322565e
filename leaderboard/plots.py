"""The leaderboard's figures (matplotlib, Agg backend, PNG).

- :func:`plot_bars`: a leaderboard as horizontal bars of test perplexity (valid where a row has
  no test figure), reported rows, the rows measured here and unaudited rows in different colours.
- :func:`plot_frequency`: the seed paper's Figure 4: the mean per-token difference in log
  perplexity (NLL, nats) between two models, in 10 buckets of target words by train frequency.
- :func:`plot_gates`: histogram of a pointer-sentinel model's per-token gate ``g`` (the share of
  probability given to the vocabulary softmax; ``1 - g`` goes to the pointer).
- :func:`plot_curves`: learning curves, validation perplexity against training time, from the
  logs that ``python -m baselines train`` writes (:mod:`wikitext_toolkit_core.training_log`).
- :func:`plot_zipf`: rank-frequency of the train split of one or more corpora, log-log (the
  paper's Figures 3 and 13).
"""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from wikitext_toolkit_core.files import write_atomically  # noqa: E402

REPORTED_COLOUR = "#9aa5b1"
REPRODUCED_COLOUR = "#1f77b4"
USER_MODEL_COLOUR = "#2ca02c"
UNAUDITED_COLOUR = "#f5b971"
UNVERIFIED_COLOUR = "#e8a0a8"
WARNING_COLOUR = "#b00020"


def _save(figure: plt.Figure, out: str | Path) -> Path:
    """Write ``figure`` to ``out`` atomically, in the format its extension names (PNG when it
    has none), and close it."""
    out = Path(out)
    try:
        return write_atomically(
            out,
            lambda handle: figure.savefig(
                handle, format=out.suffix[1:] or None, dpi=130, bbox_inches="tight"
            ),
        )
    finally:
        plt.close(figure)


def _show_warning(figure: plt.Figure, warning: str | None) -> None:
    """``warning`` (when there is one) across the top of ``figure``, above the title, in red:
    a figure drawn from results that are not audited and verified says so."""
    if warning is not None:
        figure.set_layout_engine("constrained")  # the warning just above the title, not clipped
        figure.suptitle(textwrap.fill(warning, 110), color=WARNING_COLOUR, fontsize=9, fontweight="bold")


# ---- leaderboard bars --------------------------------------------------------------------------


def plot_bars(
    frame: pd.DataFrame, title: str, out: str | Path, log: bool | None = None, warning: str | None = None
) -> Path:
    """Bars of a ranked leaderboard (columns of :data:`table.COLUMNS`), best at the top.
    ``log``: logarithmic perplexity axis; by default when the largest figure is over 5 times
    the smallest (a unigram model beside AWD-LSTM). ``warning``: a line shown above the title
    (unaudited or unverified rows drawn)."""
    from leaderboard.table import UNAUDITED, UNVERIFIED, USER_MODEL, format_number

    unranked = {
        UNAUDITED: (UNAUDITED_COLOUR, "unaudited (measured here, not ranked)"),
        UNVERIFIED: (UNVERIFIED_COLOUR, "unverified (no per-token log-probabilities, not ranked)"),
    }

    rows = frame[frame["test_ppl"].notna() | frame["valid_ppl"].notna()].copy()
    if rows.empty:
        raise ValueError(f"{title}: no row has a valid or test perplexity to plot")
    rows["value"] = rows["test_ppl"].fillna(rows["valid_ppl"])
    rows["which"] = np.where(rows["test_ppl"].notna(), "test", "valid")
    values = rows["value"].to_numpy(dtype=float)
    if log is None:
        log = values.max() / values.min() > 5
    height = max(2.5, 0.32 * len(rows) + 1.2)
    figure, axis = plt.subplots(figsize=(9, height))
    positions = np.arange(len(rows))[::-1]
    colour_of_kind = {
        "reported": REPORTED_COLOUR,
        USER_MODEL: USER_MODEL_COLOUR,
        **{kind: colour for kind, (colour, _) in unranked.items()},
    }
    colours = [colour_of_kind.get(kind, REPRODUCED_COLOUR) for kind in rows["kind"]]
    hatches = ["//" if which == "valid" else "" for which in rows["which"]]
    left = values.min() / 1.5 if log else 0
    bars = axis.barh(positions, values - left, left=left, color=colours, edgecolor="black", linewidth=0.4)
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    for position, value, which in zip(positions, values, rows["which"]):
        axis.text(
            value * (1.02 if log else 1.0) + (0 if log else values.max() * 0.01),
            position,
            format_number(value) + (" (valid)" if which == "valid" else ""),
            va="center",
            fontsize=8,
        )
    axis.set_yticks(positions)
    axis.set_yticklabels(
        [str(m) if len(str(m)) <= 60 else str(m)[:57] + "..." for m in rows["model"]], fontsize=8
    )
    if log:
        axis.set_xscale("log")
        axis.set_xlim(left, values.max() * 1.6)
        nice = [m * 10**e for e in range(0, 7) for m in (1, 2, 5)]
        ticks = [t for t in nice if left <= t <= values.max() * 1.6]
        axis.set_xticks(ticks)
        axis.set_xticklabels([f"{t:g}" for t in ticks])
        axis.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    else:
        axis.set_xlim(0, values.max() * 1.15)
    axis.set_xlabel("test perplexity (lower is better)" + (", log scale" if log else ""))
    axis.set_title(title)
    axis.grid(axis="x", which="both", alpha=0.3)
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor=REPRODUCED_COLOUR, edgecolor="black", label="baselines measured here"),
        Patch(facecolor=REPORTED_COLOUR, edgecolor="black", label="reported (published)"),
    ]
    if (rows["kind"] == USER_MODEL).any():
        handles.insert(1, Patch(facecolor=USER_MODEL_COLOUR, edgecolor="black", label="your models"))
    for kind, (colour, label) in unranked.items():
        if (rows["kind"] == kind).any():
            handles.append(Patch(facecolor=colour, edgecolor="black", label=label))
    if (rows["which"] == "valid").any():
        handles.append(
            Patch(facecolor="white", edgecolor="black", hatch="//", label="valid figure (no test figure)")
        )
    axis.legend(handles=handles, loc="upper right", fontsize=8)  # the best (shortest) bars are on top
    _show_warning(figure, warning)
    return _save(figure, out)


# ---- Figure 4: difference by word frequency ------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Buckets:
    """Word-frequency buckets (0 = most frequent). ``of_word[id]`` is the bucket of each word
    for the ``types`` and ``tokens`` modes; the ``heldout`` mode buckets evaluated tokens."""

    count: int
    mode: str
    train_counts: np.ndarray  # train occurrences of each word id
    of_word: np.ndarray | None

    def assign(self, targets: np.ndarray) -> np.ndarray:
        """The bucket of each evaluated token (by its target word)."""
        if self.of_word is not None:
            return self.of_word[targets]
        # heldout: sort the evaluated tokens by their word's train frequency (stable) and cut
        # the sorted sequence into equal numbers of tokens.
        order = np.argsort(-self.train_counts[targets], kind="stable")
        which = np.empty(len(targets), dtype=np.int64)
        which[order] = np.arange(len(targets)) * self.count // max(len(targets), 1)
        return which

    def types(self, targets: np.ndarray) -> np.ndarray:
        """Distinct target words per bucket (for ``types``: every vocabulary word counts)."""
        if self.of_word is not None and self.mode == "types":
            return np.bincount(self.of_word, minlength=self.count)
        which = self.assign(targets)
        pairs = np.unique(np.stack([which, targets]), axis=1)
        return np.bincount(pairs[0], minlength=self.count)


BUCKETINGS = ("types", "tokens", "heldout")


def frequency_buckets(
    train_ids: np.ndarray, vocab_size: int, count: int = 10, mode: str = "types"
) -> Buckets:
    """Buckets of words by train frequency (most frequent first; ties by id, which in the
    harness's vocabulary is first occurrence), in ``count`` equal-size buckets, where "size" is:

    - ``types`` (default): the number of distinct vocabulary words (sizes differ by at most one),
      our reading of the paper's Figure 4 ("words were sorted by frequency and split into equal
      sized buckets");
    - ``tokens``: the share of train tokens, so each bucket covers the same amount of training
      text (the frequent buckets then hold a handful of words each);
    - ``heldout``: the number of evaluated tokens (as Jozefowicz et al. 2016, Figure 2: "words
      from the hold-out set are grouped into buckets of equal size based on their frequencies");
      one word's tokens may straddle two buckets.
    """
    if count < 1 or count > vocab_size:
        raise ValueError(f"bucket count must be between 1 and the vocabulary size ({vocab_size})")
    counts = np.bincount(train_ids, minlength=vocab_size)[:vocab_size]
    order = np.argsort(-counts, kind="stable")
    if mode == "heldout":
        return Buckets(count, mode, counts, None)
    of_word = np.empty(vocab_size, dtype=np.int64)
    if mode == "types":
        of_word[order] = np.arange(vocab_size) * count // vocab_size
    elif mode == "tokens":
        before = np.concatenate([[0], np.cumsum(counts[order])[:-1]])
        of_word[order] = np.minimum(before * count // max(counts.sum(), 1), count - 1)
    else:
        raise ValueError(f"unknown bucketing {mode!r} ({', '.join(BUCKETINGS)})")
    return Buckets(count, mode, counts, of_word)


@dataclasses.dataclass(frozen=True)
class BucketDifference:
    buckets: Buckets
    mean: np.ndarray  # mean NLL(A) - NLL(B) per bucket (nan where a bucket has no tokens)
    stderr: np.ndarray
    tokens: np.ndarray  # evaluated tokens per bucket
    types: np.ndarray  # distinct words per bucket


def bucket_difference(
    targets: np.ndarray, log_probs_a: np.ndarray, log_probs_b: np.ndarray, buckets: Buckets
) -> BucketDifference:
    """Mean per-token NLL difference (A minus B: positive where B is better) per bucket of the
    target word."""
    if not (len(targets) == len(log_probs_a) == len(log_probs_b)):
        raise ValueError(
            f"{len(targets)} targets but {len(log_probs_a)} and {len(log_probs_b)} log-probabilities"
        )
    difference = (-np.asarray(log_probs_a, dtype=np.float64)) - (-np.asarray(log_probs_b, dtype=np.float64))
    which = buckets.assign(targets)
    tokens = np.bincount(which, minlength=buckets.count)
    sums = np.bincount(which, weights=difference, minlength=buckets.count)
    squares = np.bincount(which, weights=difference**2, minlength=buckets.count)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums / tokens
        variance = np.maximum(squares / tokens - mean**2, 0) * tokens / np.maximum(tokens - 1, 1)
        stderr = np.sqrt(variance / tokens)
    return BucketDifference(buckets, mean, stderr, tokens, buckets.types(targets))


def plot_frequency(
    result: BucketDifference,
    label_a: str,
    label_b: str,
    title: str,
    out: str | Path,
    warning: str | None = None,
) -> Path:
    """The seed paper's Figure 4 of ``result`` (A against B); ``warning``: a line shown above
    the title (a result that is not audited and verified drawn)."""
    count = result.buckets.count
    figure, axis = plt.subplots(figsize=(8, 4.5))
    x = np.arange(1, count + 1)
    colours = ["#2ca02c" if m >= 0 else "#d62728" for m in np.nan_to_num(result.mean)]
    axis.bar(
        x,
        np.nan_to_num(result.mean),
        yerr=1.96 * np.nan_to_num(result.stderr),
        color=colours,
        edgecolor="black",
        linewidth=0.4,
        capsize=3,
    )
    axis.axhline(0, color="black", linewidth=0.8)
    labels = [f"{i}\n{int(t):,} tok" for i, t in zip(x, result.tokens)]
    axis.set_xticks(x)
    axis.set_xticklabels(labels, fontsize=7)
    what = {"types": "distinct words", "tokens": "train tokens", "heldout": "evaluated tokens"}[
        result.buckets.mode
    ]
    axis.set_xlabel(
        f"word-frequency bucket (1 = most frequent ... {count} = rarest in train; equal {what} per bucket)",
        fontsize=9,
    )
    axis.set_ylabel("mean log-perplexity difference\n(nats/token; > 0: B better)", fontsize=9)
    axis.set_title(f"{title}\nA = {label_a}   B = {label_b}", fontsize=10)
    axis.grid(axis="y", alpha=0.3)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(facecolor="#2ca02c", edgecolor="black", label="B better (mean per bucket)"),
        Patch(facecolor="#d62728", edgecolor="black", label="A better (mean per bucket)"),
        Line2D(
            [], [], color="black", marker="_", markersize=8, linewidth=1.2, label="95% normal CI of the mean"
        ),
    ]
    axis.legend(handles=handles, fontsize=8, loc="best")
    _show_warning(figure, warning)
    return _save(figure, out)


# ---- pointer gate histogram ----------------------------------------------------------------------


def load_gates(path: str | Path) -> np.ndarray:
    """A ``[N]`` float array of gate values in [0, 1] from a ``.npy`` file, such as the one
    ``python -m baselines analyze ... --save-gates GATES.npy`` writes (float32, stream order)."""
    path = Path(path)
    try:
        gates = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable .npy array ({error})") from None
    if not isinstance(gates, np.ndarray):  # an .npz archive: np.load opens it as an NpzFile
        gates.close()
        raise ValueError(f"{path}: not a .npy array (an .npz archive of arrays)")
    if gates.ndim != 1 or not np.issubdtype(gates.dtype, np.floating) or len(gates) == 0:
        raise ValueError(
            f"{path}: expected a non-empty 1-D float array of gate values, got {gates.dtype} {gates.shape}"
        )
    tolerance = 1e-6  # float32 rounding of a softmax share
    if not np.all(np.isfinite(gates)) or gates.min() < -tolerance or gates.max() > 1 + tolerance:
        raise ValueError(
            f"{path}: gate values must be finite and within [0, 1] "
            f"(found {np.nanmin(gates):g} .. {np.nanmax(gates):g})"
        )
    return np.clip(gates.astype(np.float64), 0.0, 1.0)


def gates_title(path: str | Path) -> str:
    """The default title of the gate histogram of ``path``: ``pointer sentinel gate:`` and the
    model, dataset and split that the JSON file beside it (same name, ``.json``) records, else
    the gate file's name (also when that file cannot be read or records none of them)."""
    path = Path(path)
    title = f"pointer sentinel gate: {path.name}"
    sidecar = path.with_suffix(".json")
    if not sidecar.is_file():
        return title
    try:
        info = json.loads(sidecar.read_text(encoding="utf-8"))
        parts = [str(info[k]) for k in ("model", "dataset", "split") if isinstance(info, dict) and k in info]
    except (OSError, ValueError, RecursionError):  # no usable metadata: the default title
        return title
    return "pointer sentinel gate: " + " ".join(parts) if parts else title


def plot_gates(gates: np.ndarray, title: str, out: str | Path, bins: int = 50) -> Path:
    figure, axis = plt.subplots(figsize=(7, 4.2))
    axis.hist(
        gates, bins=np.linspace(0, 1, bins + 1).tolist(), color="#ff7f0e", edgecolor="black", linewidth=0.3
    )
    axis.set_yscale("log")
    axis.set_xlim(0, 1)
    axis.set_xlabel("gate g (share of probability to the vocabulary softmax; 1 - g to the pointer)")
    axis.set_ylabel("tokens (log scale)")
    pointer_share = float(np.mean(gates < 0.5))
    axis.set_title(
        f"{title}\n{len(gates):,} tokens; mean g {gates.mean():.3f}, median "
        f"{np.median(gates):.3f}; pointer-dominant (g < 0.5): {100 * pointer_share:.1f}%",
        fontsize=10,
    )
    axis.axvline(gates.mean(), color="black", linestyle="--", linewidth=1, label=f"mean {gates.mean():.3f}")
    axis.legend(fontsize=8, loc="upper left")
    axis.grid(alpha=0.3)
    return _save(figure, out)


# ---- learning curves ---------------------------------------------------------------------------


#: The x axes of :func:`plot_curves`: a column of
#: :func:`leaderboard.training_logs.load_training_log` and its label.
CURVE_AXES = {
    "minutes": "training time (minutes; validation excluded)",
    "epochs": "epochs trained",
}


def plot_curves(
    curves: Sequence[tuple[str, pd.DataFrame]], title: str, out: str | Path, x: str = "minutes"
) -> Path:
    """``curves``: (label, :func:`leaderboard.training_logs.load_training_log` frame) pairs, one
    line each; validation perplexity (log scale) against ``x`` (a key of :data:`CURVE_AXES`:
    training minutes, or epochs for runs whose minutes are not comparable, as when one moved
    between a GPU and CPUs), each run's best marked."""
    figure, axis = plt.subplots(figsize=(7.5, 4.8))
    for label, frame in curves:
        (line,) = axis.plot(
            frame[x],
            frame["valid_ppl"],
            marker="o",
            markersize=3,
            label=f"{label} (best {frame['valid_ppl'].min():.1f})",
        )
        best = int(frame["valid_ppl"].to_numpy().argmin())
        axis.scatter(
            [frame[x].iloc[best]],
            [frame["valid_ppl"].iloc[best]],
            s=60,
            facecolors="none",
            edgecolors=line.get_color(),
            zorder=3,
        )
    axis.set_yscale("log")
    axis.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
    axis.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axis.set_yticks([60, 80, 100, 120, 150, 200, 300, 400, 600, 1000])
    lowest = min(frame["valid_ppl"].min() for _, frame in curves)
    highest = max(frame["valid_ppl"].max() for _, frame in curves)
    axis.set_ylim(lowest / 1.1, highest * 1.1)
    axis.set_xlabel(CURVE_AXES[x])
    axis.set_ylabel("validation perplexity (log scale)")
    axis.set_title(title, fontsize=10)
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=8)
    return _save(figure, out)


# ---- Zipf ----------------------------------------------------------------------------------------


def rank_frequency(ids: np.ndarray, vocab_size: int, exclude: Sequence[int] = ()) -> np.ndarray:
    """Occurrence counts of the word types that occur, most frequent first."""
    counts = np.bincount(ids, minlength=vocab_size).astype(np.int64)
    if len(exclude):
        counts[list(exclude)] = 0
    counts = np.sort(counts[counts > 0])[::-1]
    return counts


def plot_zipf(corpora: Sequence[tuple[str, np.ndarray]], title: str, out: str | Path) -> Path:
    """``corpora``: (label, counts sorted descending) pairs, one line each, log-log."""
    figure, axis = plt.subplots(figsize=(7, 5))
    for label, counts in corpora:
        ranks = np.arange(1, len(counts) + 1)
        axis.loglog(
            ranks,
            counts,
            label=f"{label} ({len(counts):,} types, {int(counts.sum()):,} tokens)",
            linewidth=1.4,
        )
    biggest = max(len(c) for _, c in corpora)
    top = max(int(c[0]) for _, c in corpora)
    reference = np.array([1, biggest])
    axis.loglog(
        reference,
        top / reference,
        color="grey",
        linestyle=":",
        linewidth=1,
        label="Zipf's law, frequency ∝ 1/rank",
    )
    axis.set_xlabel("frequency rank (log scale)")
    axis.set_ylabel("occurrences in the split (log scale)")
    axis.set_title(title, fontsize=10)
    axis.grid(which="major", alpha=0.3)
    axis.legend(fontsize=8)
    axis.set_ylim(bottom=0.8)
    if math.isfinite(biggest):
        axis.set_xlim(0.8, biggest * 1.5)
    return _save(figure, out)
