"""The cheats that once beat the audits (issue 73, :mod:`tests.cheats`), scored with the default
audits on PTB valid under the default protocol, and on WikiText-2 valid under the documents
protocol: each must fail the causality audit or gain nothing over the honest bigram it cheats
from; the honest bigram must pass both audits."""

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


#: Where each protocol is tried: the dataset, and the protocol's name.
SETTINGS = {"stream": ("ptb", "stream"), "documents": ("wikitext-2", "documents")}


def score(name: str, setting: str = "stream") -> SplitResult:
    """The plugin ``tests.cheats.<name>`` on valid of :data:`SETTINGS`' ``setting``, default audits."""
    dataset, protocol = SETTINGS[setting]
    (result,) = evaluate_model(
        f"tests.cheats.{name}", dataset, splits="valid", protocol=protocol, progress=False
    )
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
def honest_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SplitResult]:
    """The honest base's result in each setting, filled by :func:`honest`, which scores it once."""
    return {}


@pytest.fixture(params=SETTINGS)
def honest(
    request: pytest.FixtureRequest,
    honest_results: dict[str, SplitResult],
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[str, SplitResult]:
    """A setting of :data:`SETTINGS` and the honest base's result there, scored with a cache of
    its own as every test's (conftest's ``isolated_cache``, which the module's results cannot use)."""
    setting: str = request.param
    if setting not in honest_results:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HARNESS_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))
            patch.delenv("HARNESS_DATA_DIR", raising=False)
            patch.syspath_prepend(str(REPO))
            honest_results[setting] = score(HONEST, setting)
    return setting, honest_results[setting]


def test_the_honest_base_passes_both_audits(honest: tuple[str, SplitResult]) -> None:
    setting, result = honest
    record = result.record.to_json()
    assert record["audit"]["passed"]
    assert record["causality_audit"]["passed"]
    assert record["protocol"]["name"] == setting
    if setting == "stream":
        assert 800 < result.perplexity < 900  # an add-one bigram: worse than the unigram's 685


@pytest.mark.parametrize("cheat", CHEATS)
def test_a_cheat_fails_the_causality_audit_or_gains_nothing(
    cheat: str, honest: tuple[str, SplitResult]
) -> None:
    setting, base_result = honest
    try:
        perplexity, base = score(cheat, setting).perplexity, base_result.perplexity
    except PluginError as error:
        assert "causality audit failed" in str(error)
        return
    assert perplexity >= SLACK * base, (
        f"{cheat} passed both audits under the {setting} protocol with perplexity {perplexity:.2f}, "
        f"where the honest base it cheats from gets {base:.2f}"
    )
