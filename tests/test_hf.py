"""The ``hf`` plugin, offline, with tiny models built from configs and saved with save_pretrained.

The tokenizer is a byte-level BPE trained with the ``tokenizers`` library on the first lines of
WikiText-2 train (the copy shipped in the package), and the models are loaded through the plugin
exactly as a user's model would be.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # never the network, even for a hub name (read on import)
INSTALL = 'pip install -e ".[hf]"'
pytest.importorskip("transformers", reason=f"the hf plugin needs transformers: {INSTALL}")
pytest.importorskip("tokenizers", reason=f"the hf plugin needs tokenizers: {INSTALL}")

import torch  # noqa: E402

from harness.cli import main  # noqa: E402
from harness.datasets import load_dataset  # noqa: E402
from harness.evaluate import evaluate  # noqa: E402
from harness.plugin import PluginError  # noqa: E402
from harness.plugins import hf  # noqa: E402
from harness.plugins.hf.detokenize import detokenize, detokenize_line  # noqa: E402
from harness.protocol import EvaluationProtocol  # noqa: E402
from harness.results import resolve_recorded_path  # noqa: E402
from harness.streams import stream_bounds  # noqa: E402
from harness.tools import hf_tiny  # noqa: E402

MAX_POSITIONS = 1024


def _wikitext_lines(data_dir: Path, split: str, count: int) -> list[str]:
    path = data_dir / "wikitext-2" / f"wiki.{split}.tokens"
    return path.read_text(encoding="utf-8").split("\n")[:count]


@pytest.fixture(scope="module")
def tokenizer_lines(real_data_dir: Path) -> list[str]:
    return [
        detokenize_line(line, "wikitext") + "\n" for line in _wikitext_lines(real_data_dir, "train", 2000)
    ]


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def model_dir(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, tokenizer_lines: list[str]
) -> Path:
    return hf_tiny.build(
        tmp_path_factory.mktemp(request.param),
        tokenizer_lines,
        hf_tiny.TinyModelSpec(
            arch=request.param,
            vocab_size=400,
            width=32,
            layers=2,
            heads=4,
            positions=MAX_POSITIONS,
        ),
    )


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory, tokenizer_lines: list[str]) -> Path:
    return hf_tiny.build(
        tmp_path_factory.mktemp("gpt2-only"),
        tokenizer_lines,
        hf_tiny.TinyModelSpec(
            arch="gpt2",
            vocab_size=400,
            width=32,
            layers=2,
            heads=4,
            positions=MAX_POSITIONS,
        ),
    )


@pytest.fixture
def dataset(real_data_dir: Path, tmp_path: Path):
    """The first four lines of WikiText-2 test (heading, paragraph) as every split, so that the
    vocabulary covers them."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    text = "\n".join(_wikitext_lines(real_data_dir, "test", 4)) + "\n"
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
    return load_dataset(str(directory))


def _load(dataset, path: Path, **model_args) -> hf.HFCausalLM:
    return hf.load_model(dataset, device="cpu", checkpoint=None, model=str(path), **model_args)


def _reference_log_likelihood(path: Path, tokens: list[str], segmentation: str) -> tuple[float, int]:
    """The model's own total log-likelihood of the detokenized text (one unwindowed forward,
    ``labels=`` loss) and the number of subwords, tokenized here without the plugin."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    text = detokenize(tokens, "wikitext")
    if segmentation == "natural":
        ids = tokenizer(text.text, add_special_tokens=False)["input_ids"]
    else:
        starts = [0, *text.piece_ends[:-1]]
        ids = [
            i
            for a, b in zip(starts, text.piece_ends)
            for i in tokenizer(text.text[a:b], add_special_tokens=False)["input_ids"]
        ]
    inputs = torch.tensor([[tokenizer.bos_token_id, *ids]])
    with torch.inference_mode():
        loss = model(input_ids=inputs, labels=inputs).loss.item()  # mean over the len(ids) targets
    return -loss * len(ids), len(ids)


@pytest.mark.parametrize("segmentation", ["pieces", "natural"])
def test_attributed_sum_equals_the_models_log_likelihood(dataset, model_dir, segmentation):
    model = _load(
        dataset, model_dir, max_context=MAX_POSITIONS, stride=MAX_POSITIONS, segmentation=segmentation
    )
    stream = dataset.tokens("test")
    evaluation = evaluate(
        model,
        stream.ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        progress=False,
        protocol=EvaluationProtocol(bptt=7, causality_points=0),
    )
    metadata = evaluation.metadata  # what result_metadata() said right after the evaluation
    tokens = [dataset.vocab.tokens[i] for i in stream.ids]
    expected, subwords = _reference_log_likelihood(model_dir, tokens, segmentation)
    assert subwords < MAX_POSITIONS  # one window: the plugin's windowing reduces to one forward
    assert metadata["subword_tokens"] == subwords
    if segmentation == "pieces":
        assert metadata["straddling_subwords"] == 0
    assert evaluation.total_log_prob == pytest.approx(expected, rel=1e-5)
    # The per-token file holds the same sum: the attribution loses nothing.
    assert evaluation.token_log_probs.sum() == pytest.approx(evaluation.total_log_prob, rel=1e-12)
    assert metadata["subword_perplexity"] == pytest.approx(math.exp(-expected / subwords), rel=1e-5)
    text_bytes = len(detokenize(tokens, "wikitext").text.encode("utf-8"))
    assert metadata["bytes"] == text_bytes
    assert metadata["bits_per_byte"] == pytest.approx(-expected / math.log(2) / text_bytes, rel=1e-5)


def _direct_scores(model: hf.HFCausalLM, ids: np.ndarray, starts: list[int]) -> np.ndarray:
    """log p(s_p | x[starts[p-1] : p]) for each subword p, one unpadded forward per subword."""
    positions = torch.tensor([model.scorer.bos_id, *ids.tolist()])
    scores = []
    with torch.inference_mode():
        for p in range(1, len(positions)):
            logits = model.scorer.network(input_ids=positions[None, starts[p - 1] : p]).logits[0, -1]
            scores.append(torch.log_softmax(logits.double(), -1)[positions[p]].item())
    return np.array(scores)


def test_window_contexts_follow_the_documented_rule(dataset, gpt2_dir):
    """Subword p is scored from x_a .. x_{p-1}, a = 0 for p <= max_context, else
    ceil((p - max_context) / stride) * stride; stride = max_context gives contexts of
    1 .. max_context positions."""
    max_context = 8
    ids = np.random.default_rng(0).integers(1, 300, 3 * max_context + 3)
    by_stride = {}
    for stride in (max_context, 3):
        model = _load(dataset, gpt2_dir, max_context=max_context, stride=stride, window_batch=2)
        starts = [
            0 if p <= max_context else math.ceil((p - max_context) / stride) * stride
            for p in range(1, len(ids) + 1)
        ]
        by_stride[stride] = model.scorer.score(ids)
        np.testing.assert_allclose(by_stride[stride], _direct_scores(model, ids, starts), atol=1e-4)
    # Both strides score the first window identically (same forward); later subwords see at
    # least max_context - stride + 1 positions with stride 3, as few as 1 with stride 8.
    np.testing.assert_array_equal(by_stride[3][:max_context], by_stride[max_context][:max_context])
    assert not np.allclose(by_stride[3][max_context:], by_stride[max_context][max_context:])


@pytest.mark.parametrize("stride", [1, 3, 12])
def test_overlapping_windows_reproduce_the_unwindowed_score_of_a_short_text(dataset, model_dir, stride):
    max_context = 12
    model = _load(dataset, model_dir, max_context=max_context, stride=stride)
    short = np.random.default_rng(1).integers(1, 300, max_context)
    np.testing.assert_allclose(
        model.scorer.score(short), _direct_scores(model, short, [0] * len(short)), atol=1e-4
    )
    if stride == 1:  # fully overlapping: past max_context, each subword sees max_context positions
        longer = np.random.default_rng(2).integers(1, 300, 2 * max_context)
        starts = [max(0, p - max_context) for p in range(1, len(longer) + 1)]
        np.testing.assert_allclose(
            model.scorer.score(longer), _direct_scores(model, longer, starts), atol=1e-4
        )


def test_passes_the_causality_audit_and_writes_its_figures(dataset, gpt2_dir, tmp_path, capsys):
    output = tmp_path / "result.json"
    code = main(
        [
            "eval",
            "hf",
            "--dataset",
            str(dataset.directory),
            "--split",
            "test",
            "--model-args",
            f"model={gpt2_dir},max_context=32,stride=16",
            "--bptt",
            "5",
            "--output",
            str(output),
        ]
    )
    assert code == 0, capsys.readouterr().err
    record = json.loads(output.read_text())
    assert record["causality_audit"]["passed"] and record["causality_audit"]["points"] > 0
    assert resolve_recorded_path(record["checkpoint"]) == Path(os.path.relpath(gpt2_dir))
    metadata = record["plugin_metadata"]
    assert metadata["scoring"] == record["scoring"] == "subword"
    assert record["audited"] and record["unaudited_reasons"] == []
    assert metadata["audits"]["causality"] == "applies"
    assert (metadata["detokenizer"], metadata["max_context"], metadata["stride"]) == ("wikitext", 32, 16)
    assert metadata["word_tokens"] == record["tokens"] == len(dataset.tokens("test").ids)
    log_prob = -record["nll"] * record["tokens"]
    assert metadata["bits_per_byte"] == pytest.approx(-log_prob / math.log(2) / metadata["bytes"])
    assert metadata["subword_perplexity"] == pytest.approx(math.exp(-log_prob / metadata["subword_tokens"]))


def test_several_streams_each_score_their_own_text(dataset, gpt2_dir):
    model = _load(dataset, gpt2_dir, max_context=32, stride=8)
    ids = dataset.tokens("test").ids
    evaluation = evaluate(
        model,
        ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        progress=False,
        protocol=EvaluationProtocol(batch_size=3, bptt=4, causality_points=0),
    )
    bounds = np.concatenate([[0], np.cumsum(stream_bounds(len(ids), 3)[1])])
    separately = sum(
        model.score_tokens(ids[a:b]).word_log_probs.sum() for a, b in zip(bounds[:-1], bounds[1:])
    )
    assert evaluation.total_log_prob == pytest.approx(separately, rel=1e-9)


class _Counting:
    """The plugin's model, counting the calls the harness makes."""

    def __init__(self, model: hf.HFCausalLM) -> None:
        self.model, self.streams, self.resets = model, [], 0

    def reset(self, batch_size: int) -> None:
        self.resets += 1
        self.model.reset(batch_size)

    def score_stream(self, stream):
        self.streams.append(stream.targets[0].copy())
        return self.model.score_stream(stream)

    def result_metadata(self):
        return self.model.result_metadata()


def test_the_evaluation_and_the_audit_hand_the_plugin_whole_streams(real_data_dir, tmp_path, gpt2_dir):
    """Each pass hands over each stream whole, once: the audit's pass scores its substituted
    streams through the method that scored the figure. A text that is no split of the dataset
    (here: valid's first lines scored as the test split of another directory) is scored as it
    is; nothing is searched."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    lines = _wikitext_lines(real_data_dir, "valid", 12)
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text("\n".join(lines) + "\n", encoding="utf-8")
    dataset = load_dataset(str(directory))
    counting = _Counting(_load(dataset, gpt2_dir, max_context=32, stride=8))
    ids = dataset.tokens("test").ids
    evaluation = evaluate(
        counting,
        ids,
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        protocol=EvaluationProtocol(batch_size=2, causality_points=20, causality_seed=0),
        progress=False,
    )
    assert counting.resets == 2 and len(counting.streams) == 4  # two passes of two streams
    half = stream_bounds(len(ids), 2)[1][0]
    evaluated = [0, 1] if evaluation.causality.audit_pass == "second" else [2, 3]
    np.testing.assert_array_equal(np.concatenate([counting.streams[i] for i in evaluated]), ids)
    audited = np.concatenate([counting.streams[i] for i in {0, 1, 2, 3} - set(evaluated)])
    assert (audited != ids).sum() == 20  # the substituted targets
    assert len(counting.streams[evaluated[0]]) == half
    separately = sum(counting.model.score_tokens(counting.streams[i]).word_log_probs.sum() for i in evaluated)
    assert evaluation.total_log_prob == pytest.approx(separately, rel=1e-9)
    assert evaluation.metadata["word_tokens"] == len(ids)  # the evaluation's pass, not the audit's


def test_natural_segmentation_fails_the_causality_audit_through_the_scoring_method(tmp_path, gpt2_dir):
    """With the whole text tokenized at once a subword can straddle two word-level tokens
    (GPT-2's pre-tokenizer cuts ``<unk>,`` into ``<``, ``unk``, ``>,``), so an earlier token's
    score depends on the next one. The audit sees it where a stream's first substitution
    follows such a token: here every other token, in each of 8 streams, through the same
    ``score_stream`` that scores the figure (the same text tokenized piece by piece passes)."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text(" the <unk> , <unk> , <unk> , <unk> .\n" * 40)
    dataset = load_dataset(str(directory))
    ids = dataset.tokens("test").ids
    options = dict(
        eos_id=dataset.vocab.eos_id,
        vocab_size=len(dataset.vocab),
        protocol=EvaluationProtocol(batch_size=8, causality_seed=0),
        progress=False,
    )
    pieces = _load(dataset, gpt2_dir, max_context=64, stride=32)
    assert evaluate(pieces, ids, **options).causality.passed
    natural = _load(dataset, gpt2_dir, max_context=64, stride=32, segmentation="natural")
    with pytest.raises(PluginError, match="causality audit failed .* changes"):
        evaluate(natural, ids, **options)


def test_natural_segmentation_attributes_a_straddling_subword_to_its_last_token(dataset, gpt2_dir):
    tokens = ("the", "<unk>", ",", "the", "<eos>")
    natural = _load(dataset, gpt2_dir, max_context=64, stride=64, segmentation="natural")
    assert ">," in natural.tokenizer.get_vocab()  # a merge of the BPE trained on WikiText-2
    ids = np.array([dataset.vocab[t] for t in tokens])
    scores = natural.score_tokens(ids)
    assert detokenize(tokens, "wikitext").text == "the <unk>, the\n"
    np.testing.assert_array_equal(scores.word_straddling, [0, 0, 1, 0, 0])  # ">," counts for ","
    pieces = _load(dataset, gpt2_dir, max_context=64, stride=64).score_tokens(ids)
    assert pieces.word_straddling.sum() == 0
    assert pieces.word_subwords[2] == 1  # "," alone


def test_lm_eval_windows_end_with_a_full_window_back(dataset, gpt2_dir):
    """``detokenizer=lm-eval`` scores in lm-evaluation-harness's rolling windows: disjoint windows
    of ``max_context`` subwords, the last reading the ``max_context`` before the text's end."""
    max_context = 8
    model = _load(
        dataset,
        gpt2_dir,
        max_context=max_context,
        stride=max_context,
        window_batch=2,
        detokenizer="lm-eval",
        segmentation="natural",
    )
    ids = np.random.default_rng(3).integers(1, 300, 2 * max_context + 3)
    starts = [0] * max_context + [max_context] * max_context + [len(ids) - max_context] * 3
    np.testing.assert_allclose(model.scorer.score(ids), _direct_scores(model, ids, starts), atol=1e-4)


def test_lm_eval_scores_nothing_outside_a_page(dataset, gpt2_dir):
    model = _load(dataset, gpt2_dir, max_context=64, stride=64, detokenizer="lm-eval", segmentation="natural")
    eos = dataset.vocab.eos_id
    blank = model.score_tokens(np.array([eos, eos]))
    assert blank.word_log_probs.tolist() == [0.0, 0.0] and blank.word_subwords.sum() == 0
    page = model.score_tokens(np.array([eos, *dataset.tokens("test").ids]))  # the <eos> before a page
    assert page.word_subwords[0] == 0 and page.word_log_probs[0] == 0.0 and page.word_subwords.sum() > 0


# --- one-line errors --------------------------------------------------------------------------


def _error(capsys, *args: str) -> str:
    """The error line of a failing ``harness eval hf`` (transformers may log other lines)."""
    code = main(["eval", "hf", *args])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert code == 2
    assert len(errors) == 1, errors
    return errors[0]


def test_unknown_hub_name_is_one_line(dataset, capsys):
    err = _error(
        capsys, "--dataset", str(dataset.directory), "--model-args", "model=no-such-org/no-such-model-7f3a"
    )
    assert "neither a local directory nor a model on the Hugging Face Hub" in err
    assert "HF_HUB_OFFLINE" in err


def test_missing_directory_and_directory_without_config(dataset, tmp_path, capsys):
    err = _error(
        capsys, "--dataset", str(dataset.directory), "--model-args", f"model={tmp_path}/missing/model"
    )
    assert "no such model directory" in err
    empty = tmp_path / "empty"
    empty.mkdir()
    err = _error(capsys, "--dataset", str(dataset.directory), "--model-args", f"model={empty}")
    assert "has no config.json" in err


def test_tokenizer_without_offsets_is_refused(dataset, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, ByT5Tokenizer

    directory = tmp_path / "slow"
    slow = ByT5Tokenizer()
    AutoModelForCausalLM.from_config(
        hf_tiny.tiny_config("gpt2", len(slow), slow.eos_token_id, width=16, layers=1, heads=2, positions=64)
    ).save_pretrained(directory)
    slow.save_pretrained(directory)
    err = _error(
        capsys,
        "--dataset",
        str(dataset.directory),
        "--model-args",
        f"model={directory},max_context=64,stride=32",
    )
    assert "ByT5Tokenizer" in err and "no character offsets" in err


@pytest.mark.parametrize("segmentation", ["pieces", "natural"])
def test_a_model_directory_without_its_tokenizer_is_refused(dataset, gpt2_dir, tmp_path, segmentation):
    """transformers loads an empty tokenizer from a directory with weights only, which would
    score every word with no subwords at all: perplexity 1."""
    from transformers import AutoModelForCausalLM

    directory = tmp_path / "weights-only"
    AutoModelForCausalLM.from_pretrained(gpt2_dir).save_pretrained(directory)
    with pytest.raises(PluginError, match="makes no subwords of text"):
        _load(dataset, directory, max_context=64, stride=32, segmentation=segmentation)


def test_a_tokenizer_of_another_model_is_refused(dataset, gpt2_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory = tmp_path / "mixed"
    tokenizer = AutoTokenizer.from_pretrained(gpt2_dir)
    small = hf_tiny.tiny_config("gpt2", 300, 0, width=16, layers=1, heads=2, positions=MAX_POSITIONS)
    AutoModelForCausalLM.from_config(small).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    with pytest.raises(PluginError, match=f"has {len(tokenizer):,} subwords, the model embeddings for 300"):
        _load(dataset, directory, max_context=64, stride=32)


def test_model_larger_than_memory_is_refused_before_loading(dataset, gpt2_dir, tmp_path, capsys):
    from transformers import AutoTokenizer

    directory = tmp_path / "huge"
    hf_tiny.tiny_config(
        "gpt2", 400, 0, width=65536, layers=1, heads=64, positions=MAX_POSITIONS
    ).save_pretrained(directory)
    AutoTokenizer.from_pretrained(gpt2_dir).save_pretrained(directory)  # config, no weights
    err = _error(
        capsys,
        "--dataset",
        str(dataset.directory),
        "--model-args",
        f"model={directory},max_context=64,stride=32",
    )
    assert "GiB for its weights" in err and "free" in err


def test_bad_window_arguments(dataset, gpt2_dir):
    with pytest.raises(PluginError, match="stride"):
        _load(dataset, gpt2_dir, max_context=16, stride=32)
    with pytest.raises(PluginError, match="exceeds the 1024 positions"):
        _load(dataset, gpt2_dir, max_context=2048, stride=512)
    lm_eval = "detokenizer=lm-eval scores each page as lm-evaluation-harness does"
    with pytest.raises(PluginError, match=f"{lm_eval}.* not segmentation=pieces and stride=512"):
        _load(dataset, gpt2_dir, detokenizer="lm-eval")
    with pytest.raises(PluginError, match="takes segmentation=natural and stride=64 .max_context."):
        _load(dataset, gpt2_dir, max_context=64, stride=32, detokenizer="lm-eval", segmentation="natural")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ("max_context=true", "hf: max_context must be a positive integer, got True"),
        ("stride=0", "hf: stride must be a positive integer, got 0"),
        ("trust_remote_code=maybe", "hf: trust_remote_code must be true or false, got 'maybe'"),
    ],
)
def test_bad_arguments_are_one_line_errors_before_loading(dataset, capsys, arguments, message):
    err = _error(
        capsys, "--dataset", str(dataset.directory), "--model-args", f"model=no/such/model,{arguments}"
    )
    assert err == f"error: {message}"


def test_a_tokenizer_that_prefixes_each_input_needs_natural_segmentation(
    dataset, gpt2_dir, tmp_path, tokenizer_lines
):
    """SentencePiece-style Metaspace ("first") prefixes "▁" to every input: tokenized piece by
    piece, "\\nRobert" would read "\\n Robert". The plugin refuses it unless told natural."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    backend.decoder = decoders.Metaspace(prepend_scheme="first")
    backend.train_from_iterator(
        tokenizer_lines,
        trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>"], show_progress=False),
    )
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", unk_token="<unk>")
    directory = tmp_path / "metaspace"
    AutoModelForCausalLM.from_pretrained(gpt2_dir).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    with pytest.raises(PluginError, match="segmentation=natural"):
        _load(dataset, directory, max_context=64, stride=32)
    natural = _load(dataset, directory, max_context=64, stride=32, segmentation="natural")
    assert natural.score_tokens(dataset.tokens("test").ids[:20]).word_log_probs.sum() < 0
