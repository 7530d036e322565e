"""The paired bootstrap on synthetic per-token losses, and the ``compare`` command."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error
from test_leaderboard import make_result

from leaderboard.bootstrap import _block_sums, paired_bootstrap
from leaderboard.cli import main


def synthetic(n: int, shift: float, seed: int, rho: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Log-probabilities of two models whose per-token NLLs differ by ``shift`` on average
    (B worse), with AR(1) correlation ``rho`` in the per-token difference."""
    rng = np.random.default_rng(seed)
    nll_a = 3.0 + rng.gamma(2.0, 1.0, n)  # mean 5 nats, like an LSTM on PTB; never below 3
    noise = rng.normal(0, 1, n)
    if rho:
        for i in range(1, n):
            noise[i] += rho * noise[i - 1]
        noise *= math.sqrt(1 - rho**2)
    nll_b = nll_a + shift + 0.5 * noise
    return -nll_a, -nll_b


@pytest.mark.parametrize("block_length", [1, None])
def test_interval_covers_a_known_difference(block_length: int | None) -> None:
    log_a, log_b = synthetic(20_000, shift=0.05, seed=1)
    result = paired_bootstrap(log_a, log_b, samples=2000, seed=0, block_length=block_length)
    low, high = result.nll_ci
    assert low <= -0.05 <= high  # the true mean NLL difference A - B
    assert high < 0 and result.p_value < 0.01  # and it is told apart from no difference
    # The perplexity interval covers the difference the true shift implies at A's perplexity.
    implied = result.ppl_a - result.ppl_a * math.exp(0.05)
    assert result.ppl_ci[0] <= implied <= result.ppl_ci[1]
    assert result.ppl_diff == pytest.approx(result.ppl_a - result.ppl_b)


def test_identical_inputs_give_an_interval_at_zero_and_p_one() -> None:
    log_a, _ = synthetic(5000, shift=0.0, seed=2)
    result = paired_bootstrap(log_a, log_a.copy(), samples=500, seed=0)
    assert result.ppl_ci[0] <= 0 <= result.ppl_ci[1] and result.nll_ci == (0.0, 0.0)
    assert result.p_value == 1.0 and result.ppl_diff == 0.0


def test_no_true_difference_usually_covers_zero() -> None:
    covered = 0
    for seed in range(20):
        log_a, log_b = synthetic(4000, shift=0.0, seed=100 + seed)
        result = paired_bootstrap(log_a, log_b, samples=400, seed=seed)
        covered += result.nll_ci[0] <= 0 <= result.nll_ci[1]
    assert covered >= 16  # 95% intervals: 19 of 20 expected


def test_blocks_widen_the_interval_for_dependent_tokens() -> None:
    log_a, log_b = synthetic(20_000, shift=0.02, seed=3, rho=0.9)
    iid = paired_bootstrap(log_a, log_b, samples=1000, seed=0, block_length=1)
    blocks = paired_bootstrap(log_a, log_b, samples=1000, seed=0)
    width = lambda r: r.nll_ci[1] - r.nll_ci[0]  # noqa: E731
    assert width(blocks) > 2 * width(iid)  # AR(0.9): the i.i.d. interval is ~4x too narrow


def test_memory_blocking_does_not_change_the_answer() -> None:
    log_a, log_b = synthetic(3000, shift=0.01, seed=4)
    small = paired_bootstrap(log_a, log_b, samples=300, seed=5, block_length=1, max_elements=1000)
    large = paired_bootstrap(log_a, log_b, samples=300, seed=5, block_length=1, max_elements=1 << 22)
    assert small.nll_ci == pytest.approx(large.nll_ci) and small.p_value == large.p_value


def test_circular_block_sums() -> None:
    values = np.arange(5, dtype=float)
    assert list(_block_sums(values, 2)) == [1, 3, 5, 7, 4]
    assert list(_block_sums(values, 1)) == list(values)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros(3), np.zeros(4))
    with pytest.raises(ValueError):
        paired_bootstrap(np.zeros(3), np.zeros(3), block_length=4)


def _results_with_logprobs(tmp_path: Path, shift: float) -> tuple[Path, Path]:
    log_a, log_b = synthetic(5000, shift=shift, seed=7)
    paths = []
    for name, values in (("a", log_a), ("b", log_b)):
        path = make_result(
            tmp_path / "results",
            f"{name}.test",
            model=f"model.{name}",
            ppl=math.exp(-values.mean()),
            tokens=len(values),
        )
        np.save(tmp_path / "results" / f"{name}.test.logprobs.npy", values)
        paths.append(path)
    return paths[0], paths[1]


def test_compare_prints_the_difference_interval_and_p_value(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a, b = _results_with_logprobs(tmp_path, shift=0.1)
    assert main(["compare", str(a), str(b), "--samples", "1000", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "A: model.a on ptb/test (stream protocol): perplexity" in out
    assert "95% CI [" in out and "p <=" in out and "A is better" in out
    assert "circular blocks of 71 tokens" in out  # ceil(sqrt(5000))


def test_the_verdict_follows_the_interval_where_the_p_value_is_at_the_level(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """With 200 resamples, 5 on the far side of 0 put the +1-corrected p at 12 / 201 > 0.05 while
    the 2.5% percentile is already beyond 0: the interval excludes 0, and so does the verdict."""
    a, b = _results_with_logprobs(tmp_path, shift=0.014)
    assert main(["compare", str(a), str(b), "--samples", "200", "--seed", "20"]) == 0
    out = capsys.readouterr().out
    nll_ci = re.search(r"mean NLL [^,]*, 95% CI \[([-+.\d]+), ([-+.\d]+)\]", out)
    assert nll_ci and float(nll_ci[2]) < 0
    assert "p = 0.0597" in out and out.endswith("; A is better at the 95% level\n")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--samples", "1000000000000000"], "argument --samples: must be at most 1,000,000"),
        (["--seed", "-1"], "argument --seed: must not be negative, got -1"),
    ],
)
def test_compare_refuses_out_of_range_options_before_any_work(
    option: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    assert main(["compare", "a.json", "b.json", *option]) == 2
    assert_one_line_error(capsys, message)


def test_compare_refuses_incompatible_or_missing_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    a, b = _results_with_logprobs(tmp_path, shift=0.1)
    other = make_result(
        tmp_path / "results", "c.valid", model="model.c", ppl=100.0, split="valid", tokens=5000
    )
    assert main(["compare", str(a), str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "split differs" in err
    (tmp_path / "results" / "b.test.logprobs.npy").unlink()
    assert main(["compare", str(a), str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not found" in err
    # A log-probability file that does not belong to its result is refused, not compared.
    np.save(tmp_path / "results" / "b.test.logprobs.npy", np.full(5000, -1.0))
    assert main(["compare", str(a), str(b)]) == 2
    assert "does not match the result's nll" in capsys.readouterr().err
    record = json.loads(b.read_text())
    record["token_log_probs_file"] = None
    b.write_text(json.dumps(record))
    (tmp_path / "results" / "b.test.logprobs.npy").unlink()
    assert main(["compare", str(a), str(b)]) == 2
    assert "no token_log_probs_file" in capsys.readouterr().err


def test_the_readmes_compare_example_is_what_the_command_prints(capsys: pytest.CaptureFixture) -> None:
    """The tour's ``compare`` example, rerun on the committed results, prints its shown output."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"python -m leaderboard (compare [^\n]*)\n```\n\n```\n(.*?)```", readme, re.S)
    assert match, "README.md: the compare example (a bash block, then its output) was not found"
    command, *paths = match.group(1).split()
    assert main([command, *(str(REPO / path) for path in paths)]) == 0
    assert capsys.readouterr().out == match.group(2)
