"""Build a tiny, randomly initialised ``transformers`` causal LM with its own BPE tokenizer.

``python -m harness.tools.hf_tiny OUT_DIR --train wiki.train.tokens [--arch gpt2|llama]``
trains a byte-level BPE tokenizer (GPT-2's pre-tokenizer) with the ``tokenizers`` library on the
detokenized lines of a benchmark file, builds a small model from a config, and saves both with
``save_pretrained``: a directory the ``hf`` plugin loads exactly as a user's model. The weights
are random (the model is for checking the plugin's machinery and speed, not for its perplexity).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.plugins.hf.detokenize import STYLES, detokenize_line
from wikitext_toolkit_core.cli import (
    ArgumentParser,
    UsageError,
    check_output_dir,
    existing_file,
    positive_int,
    run,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

BOS = "<|endoftext|>"


def train_tokenizer(lines: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """A GPT-2-style byte-level BPE ``PreTrainedTokenizerFast`` trained on ``lines``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=BOS)


def tiny_config(
    arch: str,
    vocab_size: int,
    bos_id: int,
    *,
    width: int = 64,
    layers: int = 2,
    heads: int = 4,
    positions: int = 512,
) -> object:
    """A small GPT-2 or Llama-style (RoPE, RMSNorm, SwiGLU, grouped-query) config."""
    from transformers import GPT2Config, LlamaConfig

    if arch == "gpt2":
        return GPT2Config(
            vocab_size=vocab_size,
            n_positions=positions,
            n_embd=width,
            n_layer=layers,
            n_head=heads,
            bos_token_id=bos_id,
            eos_token_id=bos_id,
        )
    if arch == "llama":
        return LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=width,
            intermediate_size=2 * width,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            max_position_embeddings=positions,
            bos_token_id=bos_id,
            eos_token_id=bos_id,
            tie_word_embeddings=False,
        )
    raise ValueError(f"unknown arch {arch!r} (gpt2, llama)")


@dataclasses.dataclass(frozen=True)
class TinyModelSpec:
    """What :func:`build` makes: a BPE tokenizer of ``vocab_size`` subwords and a random-weight
    model of this shape (:func:`tiny_config`).

    Attributes:
        arch: ``gpt2`` or ``llama`` (RoPE, RMSNorm, SwiGLU, grouped-query attention).
        vocab_size: the subwords the BPE tokenizer is trained to (the model's vocabulary is the
            tokenizer's, which may hold fewer).
        width: hidden size.
        layers: transformer blocks.
        heads: attention heads (``llama``: half as many key/value heads, at least 1).
        positions: context positions.
        seed: torch's seed for the random weights.
    """

    arch: str = "gpt2"
    vocab_size: int = 1000
    width: int = 64
    layers: int = 2
    heads: int = 4
    positions: int = 512
    seed: int = 0


def build(out: Path, lines: list[str], spec: TinyModelSpec = TinyModelSpec()) -> Path:
    """Train the tokenizer on ``lines`` (text), build the model ``spec`` describes and
    ``save_pretrained`` both in ``out``; returns ``out``."""
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = train_tokenizer(lines, spec.vocab_size)
    config = tiny_config(
        spec.arch,
        len(tokenizer),
        tokenizer.bos_token_id,
        width=spec.width,
        layers=spec.layers,
        heads=spec.heads,
        positions=spec.positions,
    )
    torch.manual_seed(spec.seed)
    model = AutoModelForCausalLM.from_config(config)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _read_lines(path: Path, count: int) -> list[str]:
    """The first ``count`` lines of the text file ``path``; a one-line error when it cannot be
    read as UTF-8 text."""
    try:
        return path.read_text(encoding="utf-8").split("\n")[:count]
    except UnicodeDecodeError as error:
        raise UsageError(f"--train {path}: not UTF-8 text (at byte {error.start})") from None
    except OSError as error:
        raise UsageError(f"--train {path}: cannot read it: {error.strerror}") from None


def command_build(args: argparse.Namespace) -> int:
    check_output_dir(args.out, "OUT")  # before the tokenizer and model are built
    lines = _read_lines(args.train, args.lines)
    try:
        out = build(
            args.out,
            [detokenize_line(line, args.style) + "\n" for line in lines],
            TinyModelSpec(
                arch=args.arch,
                vocab_size=args.vocab_size,
                width=args.width,
                layers=args.layers,
                positions=args.positions,
            ),
        )
    except ModuleNotFoundError as error:
        if error.name not in ("torch", "transformers", "tokenizers"):
            raise
        raise UsageError(f"{error.name} is not installed (pip install 'wikitext-toolkit[hf]')") from None
    print(
        f"wrote a random-weight {args.arch} ({args.layers} x {args.width}) and its "
        f"{args.vocab_size}-type BPE tokenizer to {out}"
    )
    return 0


def build_parser() -> ArgumentParser:
    parser = ArgumentParser(prog="python -m harness.tools.hf_tiny", description=__doc__)
    parser.add_argument("out", type=Path, help="directory to write the model and tokenizer to")
    parser.add_argument(
        "--train",
        type=existing_file,
        required=True,
        help="a word-level benchmark file (wiki.train.tokens, ptb.train.txt; required)",
    )
    parser.add_argument(
        "--style", choices=STYLES, default="wikitext", help="its detokenizer (default wikitext)"
    )
    parser.add_argument("--lines", type=positive_int, default=5000, help="lines to train on (default 5000)")
    parser.add_argument(
        "--arch", choices=("gpt2", "llama"), default="gpt2", help="architecture (default gpt2)"
    )
    parser.add_argument(
        "--vocab-size", type=positive_int, default=1000, help="BPE vocabulary size (default 1000)"
    )
    parser.add_argument("--width", type=positive_int, default=64, help="hidden size (default 64)")
    parser.add_argument("--layers", type=positive_int, default=2, help="layers (default 2)")
    parser.add_argument(
        "--positions", type=positive_int, default=1024, help="context positions (default 1024)"
    )
    parser.set_defaults(handler=command_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m harness.tools.hf_tiny``; returns the exit status (2 and one line for a user
    error, such as a missing ``--train`` file)."""
    return run(build_parser(), argv)


if __name__ == "__main__":
    sys.exit(main())
