"""Loading the ``hf`` plugin: a model directory or hub name, checked, behind :class:`HFCausalLM`."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Annotated, Any

import torch

from harness.datasets import Dataset
from harness.plugin import OneOf, PluginError, PositiveInt, declared_model_args
from harness.plugins.hf.attribution import SEGMENTATIONS, encode
from harness.plugins.hf.detokenize import STYLES, detokenize
from harness.plugins.hf.lm_eval_pages import LM_EVAL
from harness.plugins.hf.model import HFCausalLM, TextSettings
from harness.plugins.hf.windows import WindowScorer, WindowSettings

DTYPES = ("float32", "bfloat16", "float16")
#: Tokens whose pieces a tokenizer must reproduce when they are tokenized one by one.
_PROBE = (
    "=",
    "=",
    "Probe",
    "=",
    "=",
    "<eos>",
    "<eos>",
    "The",
    "cat",
    "'s",
    "role",
    "@-@",
    "playing",
    "(",
    "<unk>",
    ")",
    ",",
    "1",
    "@,@",
    "000",
    ".",
    "<eos>",
)


def _default_detokenizer(dataset: Dataset) -> str:
    test_file = dataset.split_files.get("test", "")
    return "ptb" if test_file.startswith("ptb.") else "wikitext"


def _load_error(name: str, error: Exception) -> PluginError:
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            return PluginError(f"hf: {name} has no config.json: not a model saved with save_pretrained")
        return PluginError(f"hf: cannot load the model in {name}: {_first_line(error)}")
    if path.exists():
        return PluginError(f"hf: {name} is a file; model= takes a directory or a hub name")
    if name.startswith((".", "/", "~")) or name.count("/") > 1:
        return PluginError(f"hf: no such model directory: {name}")
    if os.environ.get("HF_HUB_OFFLINE"):
        reason = " (offline: HF_HUB_OFFLINE is set, so only models already in the cache load)"
    else:
        reason = f": {_first_line(error)}"
    return PluginError(
        f"hf: {name!r} is neither a local directory nor a model on the Hugging Face Hub{reason}"
    )


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_tokenizer(tokenizer: Any, name: str, segmentation: str) -> None:
    """Refuse a tokenizer that makes no subwords of text (a directory without its tokenizer's
    files loads an empty one), and, with ``pieces``, one that does not reproduce text tokenized
    piece by piece (one that adds a prefix to each input, as SentencePiece's "first" Metaspace
    does, or drops characters)."""
    text = detokenize(_PROBE, "wikitext")
    ids, _, _ = encode(tokenizer.backend_tokenizer, text, segmentation)
    if len(ids) == 0:
        raise PluginError(
            f"hf: the tokenizer of {name} makes no subwords of text: is it the model's own tokenizer "
            "(tokenizer.json or the files its tokenizer class reads)?"
        )
    if segmentation != "pieces":
        return
    decoded = tokenizer.decode(ids.tolist(), clean_up_tokenization_spaces=False)
    if decoded != text.text:
        raise PluginError(
            f"hf: the tokenizer of {name} does not reproduce text tokenized piece "
            f"by piece ({text.text[:24]!r} -> {decoded[:24]!r}); use "
            "segmentation=natural"
        )


def _check_embeddings(tokenizer: Any, network: Any, name: str) -> None:
    """Refuse a tokenizer with ids beyond the model's input embeddings (another model's)."""
    rows = network.get_input_embeddings().num_embeddings
    if len(tokenizer) > rows:
        raise PluginError(
            f"hf: the tokenizer of {name} has {len(tokenizer):,} subwords, the model embeddings for "
            f"{rows:,}: they are not one model's"
        )


def _available_memory(device: str) -> int | None:
    """Free bytes where the weights will live: the accelerator's, else the host's."""
    if device.startswith("cuda"):
        return torch.cuda.mem_get_info(torch.device(device))[0]
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _check_fits(config: Any, dtype: Any, device: str, name: str) -> None:
    """Refuse a model whose weights alone exceed the free memory, before loading them."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        skeleton = AutoModelForCausalLM.from_config(config)
    needed = sum(p.numel() for p in skeleton.parameters()) * dtype.itemsize
    available = _available_memory(device)
    if available is not None and needed > available:
        raise PluginError(
            f"hf: {name} needs {needed / 2**30:.1f} GiB for its weights in {dtype} "
            f"but {device} has {available / 2**30:.1f} GiB free"
        )


def _checked_windows(windows: WindowSettings) -> WindowSettings:
    """``windows``, refused when the stride is longer than the window."""
    if windows.stride > windows.max_context:
        raise PluginError(
            f"hf: stride ({windows.stride}) must not exceed max_context ({windows.max_context})"
        )
    return windows


def _lm_eval_windows(text: TextSettings, windows: WindowSettings) -> WindowSettings:
    """``windows``, as lm-evaluation-harness's rolling windows with ``detokenizer=lm-eval`` (the
    last one reading a full window back); refused there unless each page is tokenized whole
    (``segmentation=natural``) in disjoint windows (``stride`` = ``max_context``), as it does."""
    if text.detokenizer != LM_EVAL:
        return windows
    if text.segmentation != "natural" or windows.stride != windows.max_context:
        raise PluginError(
            "hf: detokenizer=lm-eval scores each page as lm-evaluation-harness does, tokenized whole "
            f"in disjoint windows: it takes segmentation=natural and stride={windows.max_context} "
            f"(max_context), not segmentation={text.segmentation} and stride={windows.stride}"
        )
    return dataclasses.replace(windows, full_last_window=True)


def _checked_text(dataset: Dataset, text: TextSettings) -> TextSettings:
    """``text`` with the detokenizer ``auto`` resolved to the dataset's own."""
    if text.detokenizer == "auto":
        text = dataclasses.replace(text, detokenizer=_default_detokenizer(dataset))
    return text


def _start_token(tokenizer: Any, name: str) -> int:
    """The id the scored text starts with: the tokenizer's BOS, else its EOS; refuses a
    tokenizer that gives no character offsets (not a fast one)."""
    if not tokenizer.is_fast:
        raise PluginError(
            f"hf: the tokenizer of {name} ({type(tokenizer).__name__}) gives no "
            "character offsets; the plugin needs a fast (tokenizers) tokenizer"
        )
    bos_id = tokenizer.bos_token_id
    if bos_id is None:
        bos_id = tokenizer.eos_token_id
    if bos_id is None:
        raise PluginError(
            f"hf: the tokenizer of {name} has neither a BOS nor an EOS token to start the text with"
        )
    return int(bos_id)


def _check_context(config: Any, max_context: int, name: str) -> None:
    """Refuse windows longer than the model's positions (when its config gives their number)."""
    limit = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    if limit is not None and max_context > limit:
        raise PluginError(f"hf: max_context {max_context} exceeds the {limit} positions of {name}")


@dataclasses.dataclass(frozen=True)
class HFModelArgs:
    """The ``hf`` plugin's ``--model-args``, each with its default (:mod:`harness.plugins.hf`
    describes what they do).

    Attributes:
        model: a ``save_pretrained`` directory or a hub name; None: ``--checkpoint`` names it
            (one of the two, never both).
        max_context: positions per window.
        stride: subwords each window advances by (at most ``max_context``).
        window_batch: windows run at a time.
        detokenizer: ``auto`` (the dataset's own: ``ptb`` for PTB's files, else ``wikitext``), a
            style of :mod:`harness.plugins.hf.detokenize`, or ``lm-eval`` (lm-evaluation-harness's
            ``wikitext`` pages, for ``--protocol documents``: :mod:`harness.plugins.hf.lm_eval_pages`).
        segmentation: ``pieces`` (each token's piece tokenized on its own) or ``natural``.
        dtype: the weights' dtype, one of :data:`DTYPES`.
        trust_remote_code: let ``transformers`` run the model's own code (a hub model's).
    """

    model: str | None = None
    max_context: PositiveInt = 1024
    stride: PositiveInt = 512
    window_batch: PositiveInt = 8
    detokenizer: Annotated[str, OneOf(("auto", *STYLES, LM_EVAL))] = "auto"
    segmentation: Annotated[str, OneOf(SEGMENTATIONS)] = "pieces"
    dtype: Annotated[str, OneOf(DTYPES)] = "float32"
    trust_remote_code: bool = False


@declared_model_args("hf", HFModelArgs)
def load_model(
    dataset: Dataset, *, device: str, checkpoint: str | None, model_args: HFModelArgs
) -> HFCausalLM:
    """Load a causal LM (``model=`` a ``save_pretrained`` directory or a hub name, or
    ``--checkpoint DIR``) and its tokenizer; ``model_args`` are the fields of
    :class:`HFModelArgs`."""
    try:
        import transformers
    except ImportError:
        raise PluginError('hf: needs transformers: pip install -e ".[hf]"') from None
    if (model_args.model is None) == (checkpoint is None):
        raise PluginError(
            "hf: name the model once: --model-args model=PATH_OR_HUB_NAME (or --checkpoint PATH)"
        )
    name = str(model_args.model if model_args.model is not None else checkpoint)
    windows = _checked_windows(
        WindowSettings(model_args.max_context, model_args.stride, model_args.window_batch)
    )
    text = _checked_text(dataset, TextSettings(model_args.detokenizer, model_args.segmentation))
    windows = _lm_eval_windows(text, windows)
    torch_dtype = getattr(torch, model_args.dtype)
    trust_remote_code = model_args.trust_remote_code
    try:
        config = transformers.AutoConfig.from_pretrained(name, trust_remote_code=trust_remote_code)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError) as error:
        raise _load_error(name, error) from None
    bos_id = _start_token(tokenizer, name)
    _check_tokenizer(tokenizer, name, text.segmentation)
    _check_context(config, windows.max_context, name)
    try:
        _check_fits(config, torch_dtype, device, name)
        network = transformers.AutoModelForCausalLM.from_pretrained(
            name, dtype=torch_dtype, trust_remote_code=trust_remote_code
        )
    except (OSError, ValueError, KeyError) as error:
        raise _load_error(name, error) from None
    _check_embeddings(tokenizer, network, name)
    network.to(device).eval()  # type: ignore[arg-type]  # transformers' decorated .to() hides its signature
    return HFCausalLM(
        WindowScorer(network, windows, bos_id=bos_id, device=device),
        tokenizer,
        vocab=dataset.vocab.tokens,
        text=text,
        checkpoint=name,
    )
