"""Dynamic evaluation (:mod:`baselines.dynamic_eval`): it passes both audits, adapts to a text that
repeats itself, scores every segment before learning from it (a variant that learns first fails
the causality audit), starts every pass from the trained weights, and is tuned on valid only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import write_corpus
from evaluation_options import protocol_options

from baselines import checkpoint as checkpoints
from baselines import dynamic_eval
from baselines.cli import main as baselines_main
from baselines.dynamic_eval import BaseModel, DynamicFactory, DynamicLanguageModel, load_model
from baselines.models import PointerConfig, PointerSentinelLSTM, ZoneoutLSTM
from baselines.models.dynamic import RMS_EPSILON, DynamicAdapter, DynamicSettings
from baselines.models.recurrent import CoreConfig
from baselines.plugin_bridge import detach_state
from harness.datasets import Dataset, load_dataset
from harness.evaluate import Evaluation, evaluate
from harness.plugin import Chunk, ChunkScores, ModelUnavailable, PluginError
from harness.streams import stream_grid
from wikitext_toolkit_core.files import file_sha256

PHRASE = " the cat sat on the mat . \n the dog sat on the log . \n a cat and a dog met on a mat . \n"
#: A passage in an order the training text never has, repeated: what adaptation learns.
REPEATED = " mat on dog the a sat \n" * 40
SIZES = {"embedding_size": 16, "hidden_size": 16, "num_layers": 1}


@pytest.fixture
def toy(tmp_path: Path) -> Path:
    """A tiny corpus whose test split repeats one passage (280 tokens)."""
    directory = write_corpus(tmp_path / "toy", test=REPEATED)
    (directory / "wiki.train.tokens").write_text(PHRASE * 6, encoding="utf-8")
    (directory / "wiki.valid.tokens").write_text(PHRASE * 3, encoding="utf-8")
    return directory


def save_model(dataset: Dataset, path: Path, kind: str = ZoneoutLSTM.kind, seed: int = 0) -> Path:
    """A randomly initialised (from ``seed``) tiny model of ``kind``, saved as a checkpoint."""
    torch.manual_seed(seed)
    model: ZoneoutLSTM | PointerSentinelLSTM
    if kind == ZoneoutLSTM.kind:
        model = ZoneoutLSTM(CoreConfig(vocab_size=len(dataset.vocab), **SIZES))
    else:
        model = PointerSentinelLSTM(PointerConfig(vocab_size=len(dataset.vocab), window=10, **SIZES))
    path.parent.mkdir(parents=True, exist_ok=True)
    checkpoints.save(path, checkpoints.model_payload(model, dataset.vocab, dataset.name))
    return path


def score(model, dataset: Dataset, split: str = "test", **options) -> Evaluation:
    return evaluate(
        model,
        dataset.tokens(split).ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        name="dynamic_eval",
        progress=False,
        **protocol_options({"causality_seed": 1, "bptt": 20, **options}),
    )


@pytest.mark.parametrize(
    "kind, args",
    [
        (ZoneoutLSTM.kind, {"method": "sgd", "lr": 0.5, "decay": 0.01, "segment": 7}),
        (ZoneoutLSTM.kind, {"method": "rms", "lr": 0.01, "decay": 0.02, "rms_tokens": 100}),
        (ZoneoutLSTM.kind, {"lr": 0.5, "decay": 0.0, "cache_window": 5, "theta": 0.3, "interpolation": 0.2}),
        (PointerSentinelLSTM.kind, {"method": "sgd", "lr": 0.5, "decay": 0.0, "segment": 5}),
    ],
)
def test_it_passes_both_audits_and_describes_itself(toy, tmp_path, kind, args):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt", kind)
    model = load_model(dataset, device="cpu", checkpoint=str(path), base=kind, **args)
    result = score(model, dataset)
    assert result.causality.passed and result.causality.compared == "targets and distributions"
    assert result.audit.checked == result.audit.requested > 0
    described = result.metadata["dynamic_evaluation"]
    assert described["lr"] == args["lr"] and described["base"] == kind
    assert len(result.metadata["checkpoint_sha256"]) == 64
    adaptation = result.metadata["test_time_adaptation"]
    assert adaptation.startswith(f"dynamic evaluation ({described['method']}, an update every ")
    under_a_cache = adaptation.endswith(" and a neural cache of the last 5 positions' hidden states")
    assert under_a_cache == ("cache_window" in args)


@pytest.mark.parametrize("method, lr", [("sgd", 2.0), ("rms", 0.01)])
def test_adapting_to_a_text_that_repeats_itself_lowers_its_perplexity(toy, tmp_path, method, lr):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    static = score(
        load_model(dataset, device="cpu", checkpoint=str(path), lr=0.0, decay=0.0),
        dataset,
        causality_points=0,
    )
    model = load_model(
        dataset,
        device="cpu",
        checkpoint=str(path),
        method=method,
        lr=lr,
        decay=0.0,
        segment=5,
        rms_tokens=100,
    )
    dynamic = score(model, dataset, causality_points=0)
    assert dynamic.nll < 0.8 * static.nll, (dynamic.nll, static.nll)


class LearnsBeforeScoring(DynamicLanguageModel):
    """A leak: each segment's update is taken before the segment is scored."""

    def score(self, chunk: Chunk) -> ChunkScores:
        inputs, targets = torch.from_numpy(chunk.inputs), torch.from_numpy(chunk.targets)
        with torch.enable_grad():
            peek = self.module(inputs, targets, self.state)
        self.adapter.step(-peek.target_log_probs[torch.from_numpy(chunk.mask)].mean())
        output = self.module(inputs, targets, self.state)
        self.state = detach_state(output.state)
        return ChunkScores(output.target_log_probs.detach(), None)


def test_updating_before_scoring_fails_the_causality_audit(toy, tmp_path, monkeypatch):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    monkeypatch.setattr(dynamic_eval, "DynamicLanguageModel", LearnsBeforeScoring)
    model = load_model(dataset, device="cpu", checkpoint=str(path), lr=1.0, decay=0.0)
    assert isinstance(model, LearnsBeforeScoring)
    with pytest.raises(PluginError, match="causality audit failed"):
        score(model, dataset, audit_positions=0)


def test_every_pass_starts_from_the_trained_weights(toy, tmp_path):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    model = load_model(
        dataset, device="cpu", checkpoint=str(path), method="rms", lr=0.01, decay=0.01, rms_tokens=100
    )
    trained = {name: value.clone() for name, value in model.module.state_dict().items()}
    first, second = score(model, dataset, causality_points=0), score(model, dataset, causality_points=0)
    np.testing.assert_array_equal(first.token_log_probs, second.token_log_probs)
    assert any(not torch.equal(value, trained[name]) for name, value in model.module.state_dict().items())
    model.reset(1)
    for name, value in model.module.state_dict().items():
        assert torch.equal(value, trained[name]), name


def test_models_of_one_factory_each_adapt_weights_of_their_own(toy, tmp_path):
    """Models of one factory used at once: one's reset, or a new model, leaves another's adapted
    weights as they were (they shared one module, and a reset put the trained weights back in
    it), and the trained module stays trained."""
    dataset = load_dataset(str(toy))
    factory = DynamicFactory(dataset, save_model(dataset, tmp_path / "run" / "best.pt"), BaseModel(), "cpu")
    trained = {name: value.clone() for name, value in factory.module.state_dict().items()}
    grid = stream_grid(dataset.tokens("test").ids, eos_id=dataset.vocab.eos_id, batch_size=1)
    first, second = (block.chunk for block in grid.chunks(20)[:2])
    settings = DynamicSettings("sgd", 2.0, 0.0, 5)

    def scores(model: DynamicLanguageModel, chunk: Chunk) -> np.ndarray:
        return model.score(chunk).target_log_probs.numpy()

    alone = factory.model(settings)
    alone.reset(1)
    scores(alone, first)
    expected = scores(alone, second)
    adapting, static = factory.model(settings), factory.model(DynamicSettings())
    assert not {id(p) for p in adapting.module.parameters()} & {id(p) for p in static.module.parameters()}
    adapting.reset(1)
    scores(adapting, first)
    static.reset(1)
    scores(static, first)
    factory.model(settings).reset(1)
    np.testing.assert_array_equal(scores(adapting, second), expected)
    assert all(torch.equal(value, trained[name]) for name, value in factory.module.state_dict().items())


def test_the_rms_statistic_lives_with_its_factory(toy, tmp_path, monkeypatch):
    """Collected once per segment length for each factory, none kept by the module."""
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    collected = []
    collect = dynamic_eval.gradient_statistics

    def counted(module, ids, *, eos_id, segment):
        collected.append(segment)
        return collect(module, ids, eos_id=eos_id, segment=segment)

    monkeypatch.setattr(dynamic_eval, "gradient_statistics", counted)
    factory = DynamicFactory(dataset, path, BaseModel(rms_tokens=100), "cpu")
    for segment in (5, 5, None, 5):
        factory.model(DynamicSettings("rms", 0.01, 0.0, segment))
    assert collected == [5, dynamic_eval.STATISTIC_SEGMENT]
    again = DynamicFactory(dataset, path, BaseModel(rms_tokens=100), "cpu").statistics(5)
    assert collected[-1] == 5 and len(collected) == 3  # a new factory collects its own
    assert all(torch.equal(mine, theirs) for mine, theirs in zip(factory.statistics(5), again, strict=True))


def test_more_than_one_stream_is_refused(toy, tmp_path):
    """Streams sharing adapted weights would learn from each other's later text."""
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    model = load_model(dataset, device="cpu", checkpoint=str(path), lr=1.0, decay=0.0)
    with pytest.raises(PluginError, match="one stream: run it with --batch-size 1"):
        score(model, dataset, batch_size=2)


def test_tune_dynamic_refuses_test_and_the_plugin_reads_what_it_tuned(toy, tmp_path, capsys):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    command = ["tune-dynamic", "--dataset", str(toy), "--checkpoint", str(path)]
    assert baselines_main([*command, "--split", "test"]) == 2
    assert "invalid choice: 'test'" in capsys.readouterr().err
    with pytest.raises(ModelUnavailable, match="python -m baselines tune-dynamic"):
        load_model(dataset, device="cpu", checkpoint=str(path))
    grid = ["--lrs", "0", "0.3", "1", "--decays", "0", "0.01", "--segments", "5", "10", "--bptt", "20"]
    assert baselines_main([*command, *grid, "--threads", "1"]) == 0
    record = json.loads((path.parent / "dynamic_eval.json").read_text(encoding="utf-8"))
    best, search = record["best"]["zoneout_lstm/sgd"], record["searches"]["zoneout_lstm/sgd"]
    assert search["split"] == "valid" and len(search["grid"]) == 12
    assert best["lr"] > 0 and best["perplexity"] < search["static_perplexity"]
    model = load_model(dataset, device="cpu", checkpoint=str(path))
    described = model.result_metadata()["dynamic_evaluation"]
    assert (described["lr"], described["decay"], described["segment"]) == (
        best["lr"],
        best["decay"],
        best["segment"],
    )
    tuned = score(model, dataset, split="valid", bptt=20, causality_points=0)
    assert np.exp(tuned.nll) == pytest.approx(best["perplexity"], rel=1e-6)
    rms = ["--method", "rms", "--lrs", "0.001", "--decays", "0", "--segments", "5", "--bptt", "20"]
    assert baselines_main([*command, *rms, "--threads", "1"]) == 0  # rms joins sgd in the file
    chosen = load_model(dataset, device="cpu", checkpoint=str(path)).result_metadata()["dynamic_evaluation"]
    assert (chosen["method"], chosen["lr"]) == ("rms", 0.001)  # with no method given, the tuned rms
    searches = json.loads((path.parent / "dynamic_eval.json").read_text(encoding="utf-8"))["searches"]
    assert searches["zoneout_lstm/sgd"] == search and len(searches["zoneout_lstm/rms"]["grid"]) == 1
    given = load_model(dataset, device="cpu", checkpoint=str(path), method="sgd")
    assert given.result_metadata()["dynamic_evaluation"]["lr"] == best["lr"]


def test_a_tuning_of_another_checkpoint_is_refused_then_replaced(toy, tmp_path, capsys):
    """A checkpoint retrained in place of the tuned one does not inherit the tuned settings."""
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    command = ["tune-dynamic", "--dataset", str(toy), "--checkpoint", str(path), "--threads", "1"]
    assert baselines_main([*command, "--lrs", "0.3", "--decays", "0", "--segments", "5", "--bptt", "20"]) == 0
    save_model(dataset, path, seed=1)  # retrained, in place
    stale = r"dynamic_eval.json was tuned on another checkpoint than .*: run `python -m baselines tune-dyn"
    with pytest.raises(ModelUnavailable, match=stale):
        load_model(dataset, device="cpu", checkpoint=str(path))
    assert load_model(dataset, device="cpu", checkpoint=str(path), lr=0.3, decay=0.0)  # given, not tuned
    capsys.readouterr()
    rms = ["--method", "rms", "--lrs", "0.001", "--decays", "0", "--segments", "5", "--bptt", "20"]
    assert baselines_main([*command, *rms]) == 0
    assert "was tuned on another checkpoint: its entries are replaced" in capsys.readouterr().err
    record = json.loads((path.parent / "dynamic_eval.json").read_text(encoding="utf-8"))
    assert list(record["best"]) == list(record["searches"]) == ["zoneout_lstm/rms"]
    assert record["checkpoint_sha256"] == file_sha256(path)
    assert (
        load_model(dataset, device="cpu", checkpoint=str(path)).result_metadata()["dynamic_evaluation"][
            "method"
        ]
        == "rms"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ({"lr": 0.1, "decay": 0.0, "method": "adam"}, "method must be one of sgd, rms"),
        ({"lr": 0.1, "decay": 2.0}, r"decay must be in \[0, 1\]"),
        ({"lr": 0.1, "decay": 0.0, "window": 3}, "unknown model arg"),
        ({"lr": 0.1, "decay": 0.0, "base": "pointer_sentinel", "cache_window": 3}, "zoneout_lstm base only"),
    ],
)
def test_bad_model_args_are_one_line_errors(toy, tmp_path, args, message):
    dataset = load_dataset(str(toy))
    path = save_model(dataset, tmp_path / "run" / "best.pt")
    with pytest.raises(PluginError, match=message):
        load_model(dataset, device="cpu", checkpoint=str(path), **args)


@pytest.mark.parametrize(
    "method, decay", [("sgd", 0.0), ("sgd", 0.3), ("rms", 0.0), ("rms", 0.3), ("rms", 1.0)]
)
def test_the_update_is_the_documented_formula(method, decay):
    """The in-place step equals ``theta - lr * g * scale + rate * (theta_0 - theta)``, both terms
    from the weights before the step, written out plainly (the rms scale ``1 / (sqrt(MS) + eps)``
    and rate ``decay * min(sqrt(MS) / mean sqrt(MS), 1 / decay)``)."""
    generator = torch.Generator().manual_seed(0)
    weights = [torch.randn(4, 3, generator=generator, dtype=torch.float64, requires_grad=True)]
    weights.append(torch.randn(5, generator=generator, dtype=torch.float64, requires_grad=True))
    rms = [torch.rand(w.shape, generator=generator, dtype=torch.float64) + 0.1 for w in weights]
    adapter = DynamicAdapter(weights, DynamicSettings(method, 0.2, decay), rms)
    with torch.no_grad():  # a first step away from the trained weights, so the decay pulls
        for weight in weights:
            weight.add_(torch.randn(weight.shape, generator=generator, dtype=torch.float64))
    before = [weight.detach().clone() for weight in weights]
    loss = sum((weight**3).sum() for weight in weights)
    gradients = torch.autograd.grad(loss, weights)
    mean = torch.cat([r.flatten() for r in rms]).mean()
    expected = []
    for theta, theta_0, gradient, root in zip(before, adapter.trained, gradients, rms):
        scale = 1 / (root + RMS_EPSILON) if method == "rms" else 1.0
        rate = decay * torch.clamp(root / mean, max=1 / decay) if method == "rms" and decay else decay
        expected.append(theta - 0.2 * gradient * scale + rate * (theta_0 - theta))
    adapter.step(sum((weight**3).sum() for weight in weights))
    for weight, value in zip(weights, expected):
        torch.testing.assert_close(weight.detach(), value, rtol=1e-12, atol=1e-12)
