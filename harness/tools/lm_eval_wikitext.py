"""``--protocol documents`` and lm-evaluation-harness's own ``wikitext`` task on the same local
pages, offline, with the ``hf`` plugin (``detokenizer=lm-eval``) and the same model: what
``tests/test_lm_eval_agreement.py`` and ``benchmarks/lm_eval_agreement.py`` compare. A
development tool: lm-evaluation-harness is a development dependency (``pip install -e ".[dev]"``),
imported only when its task runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.api import evaluate_model

#: lm-evaluation-harness's figures, as the documents protocol records them.
FIGURES = ("word_perplexity", "byte_perplexity", "bits_per_byte")


def lm_eval_pages(text: str) -> list[str]:
    """The pages of lm-evaluation-harness's ``wikitext_document_level`` data for a split's text,
    built as its loading script builds them: a page starts at each article heading; a blank page
    before the first is dropped; lines are joined by newlines."""
    pages: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        # its heading rule, written here apart from harness.documents, which is checked against it
        heading = line.replace("= = =", "===").replace("= =", "==").strip()
        if heading.startswith("= ") and heading.endswith(" ="):
            if "\n".join(current).strip():
                pages.append("\n".join(current))
            current = []
        current.append(line)
    pages.append("\n".join(current))
    return pages


def wikitext_figures(model: str, pages: list[str], work: Path, max_context: int) -> dict[str, float]:
    """lm-evaluation-harness's ``wikitext`` task (its own YAML, detokenizer and metrics, included
    from the installed package) on ``pages``, written as JSON Lines in ``work``, scored by the
    ``transformers`` model ``model`` (a directory or hub name) on the CPU in float32, in rolling
    windows of ``max_context`` subwords (its ``max_length``)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    data = work / "test.jsonl"
    data.write_text("".join(json.dumps({"page": page}) + "\n" for page in pages), encoding="utf-8")
    tasks = work / "tasks"
    tasks.mkdir()
    included = Path(lm_eval.__file__).parent / "tasks" / "wikitext" / "wikitext.yaml"
    (tasks / "wikitext_local.yaml").write_text(
        f"include: {included}\ntask: wikitext_local\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n"
        "training_split: null\nvalidation_split: null\ntest_split: test\n",
        encoding="utf-8",
    )
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={model},dtype=float32,max_length={max_context}",
        tasks=["wikitext_local"],
        task_manager=TaskManager(include_path=str(tasks), include_defaults=False),
        batch_size=1,
        device="cpu",
    )
    scores = results["results"]["wikitext_local"]
    return {figure: scores[f"{figure},none"] for figure in FIGURES}


def documents_metrics(model: str, text: str, directory: Path, max_context: int) -> dict[str, Any]:
    """``--protocol documents`` on ``text``, written as every split of a dataset in
    ``directory`` (so that no word is out of its vocabulary): the ``hf`` plugin with ``model``,
    scoring each page as lm-evaluation-harness does (``detokenizer=lm-eval``, each page tokenized
    whole, its rolling windows of ``max_context`` subwords); the causality audit off (that
    detokenizer fails it by design). Returns the result's ``document_metrics`` with
    ``log_likelihood`` (nats) added."""
    directory.mkdir()
    for split in ("train", "valid", "test"):
        (directory / f"wiki.{split}.tokens").write_text(text, encoding="utf-8")
    (result,) = evaluate_model(
        "hf",
        directory,
        splits="test",
        protocol="documents",
        causality_audit=0,
        model_args={
            "model": model,
            "detokenizer": "lm-eval",
            "segmentation": "natural",
            "max_context": max_context,
            "stride": max_context,
        },
    )
    assert result.record.document_metrics is not None  # the documents protocol records them
    return {**result.record.document_metrics, "log_likelihood": -result.nll * result.tokens}
