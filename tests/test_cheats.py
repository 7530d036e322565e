"""The cheats that once beat the audits (issue 73, :mod:`tests.cheats`), scored on PTB valid under
the default protocol and audits: each must fail the causality audit or gain nothing over the
honest bigram it cheats from; the honest bigram must pass both audits."""

from __future__ import annotations

from pathlib import Path

import pytest
from cheats import CHEATS, HONEST  # the test directory's package, as the harness imports it: tests.cheats
from tqdm import tqdm

import harness.evaluate as evaluation
from harness.api import SplitResult, evaluate_model
from harness.plugin import PluginError

REPO = Path(__file__).resolve().parent.parent
#: How much better than the honest base's a perplexity may come out (1%: none of the cheats is
#: that close to honest).
SLACK = 0.99


def score(name: str) -> SplitResult:
    """The plugin ``tests.cheats.<name>`` on PTB valid, default protocol and audits."""
    (result,) = evaluate_model(f"tests.cheats.{name}", "ptb", splits="valid", progress=False)
    return result


@pytest.fixture(autouse=True)
def importable_cheats(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness imports a cheat by its name under the repository."""
    monkeypatch.syspath_prepend(str(REPO))


@pytest.fixture(autouse=True)
def undone_patches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two cheats patch, in the process that loads them, the harness's audit pass or tqdm's bars:
    undone after each test."""
    for owner, name in ((evaluation, "_causality_pass"), (tqdm, "__init__")):
        if name in vars(owner):
            monkeypatch.setattr(owner, name, vars(owner)[name])


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> SplitResult:
    """The honest base's result, with a cache of its own as every test's (conftest's
    ``isolated_cache``, which a fixture of this scope cannot use)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HARNESS_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))
        patch.delenv("HARNESS_DATA_DIR", raising=False)
        patch.syspath_prepend(str(REPO))
        return score(HONEST)


def test_the_honest_base_passes_both_audits(honest: SplitResult) -> None:
    record = honest.record.to_json()
    assert record["audit"]["passed"]
    assert record["causality_audit"]["passed"]
    assert 800 < honest.perplexity < 900  # an add-one bigram: worse than the unigram's 685


@pytest.mark.parametrize("cheat", CHEATS)
def test_a_cheat_fails_the_causality_audit_or_gains_nothing(cheat: str, honest: SplitResult) -> None:
    try:
        perplexity, base = score(cheat).perplexity, honest.perplexity
    except PluginError as error:
        assert "causality audit failed" in str(error)
        return
    assert perplexity >= SLACK * base, (
        f"{cheat} passed both audits with perplexity {perplexity:.2f}, where the honest base it cheats "
        f"from gets {base:.2f}"
    )
