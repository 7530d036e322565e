"""``hf``: any Hugging Face ``transformers`` causal LM, scored on the word-level benchmarks.

``python -m harness eval hf --model-args model=PATH_OR_NAME,max_context=1024,stride=512``
(install with ``pip install -e ".[hf]"``). For each word-level token stream the plugin:

1. **Detokenizes** the tokens into running text (:mod:`~harness.plugins.hf.detokenize`:
   ``wikitext`` for WikiText and builder corpora, ``ptb`` for PTB, chosen from the dataset's file
   layout unless ``detokenizer=`` says otherwise; ``detokenizer=lm-eval``, for ``--protocol
   documents``, gives lm-evaluation-harness's ``wikitext`` pages instead:
   :mod:`~harness.plugins.hf.lm_eval_pages`). Token ``t`` owns one *piece* of the text (its
   separator and surface form). ``<unk>`` is scored as the literal text ``<unk>``.
2. **Tokenizes** the text into subwords ``s_1 .. s_M``, with character offsets (a fast tokenizer
   is required). ``segmentation=pieces`` (default) tokenizes every piece on its own, so no
   subword crosses a word-token boundary and the text up to token ``t`` is tokenized the same
   whatever follows: the scores are exactly causal. ``segmentation=natural`` tokenizes the whole
   text at once (the model's usual tokenization, as lm-evaluation-harness does); a subword may
   then cover the end of one word-level token and the start of the next (GPT-2's pre-tokenizer
   cuts `` <unk>,`` into `` <``, ``unk``, ``>,``), which makes the earlier token's score depend
   on the next one, and the harness's causality audit can reject that: use it with
   ``--causality-audit 0``.
3. **Scores** ``[BOS] s_1 .. s_M`` with sliding windows of ``max_context`` positions advancing by
   ``stride``: the first window scores ``s_1 .. s_max_context`` from BOS; window ``j >= 1`` reads
   ``x_{j*stride} ..`` and scores the next ``stride`` subwords, so every subword sees at least
   ``max_context - stride + 1`` earlier positions and never a later one. Where a subword's
   context starts depends only on its index, never on the text's length. ``stride =
   max_context`` gives disjoint windows (contexts of 1 .. ``max_context``). Windows are run
   ``window_batch`` at a time, always ``max_context`` long (the last one padded on the right,
   which a causal model ignores), so a score never depends on how much text follows (but with
   ``detokenizer=lm-eval``, whose last window reads ``max_context`` subwords back from the end, as
   lm-evaluation-harness's rolling windows do).
4. **Attributes** each subword's log-probability to the word-level token whose piece holds the
   subword's last character (its offsets). The word-level token's log-probability is the sum of
   its subwords', so the harness's sum over the ``N`` word-level tokens is exactly the model's
   log-probability of the subword sequence, and the per-token file, the bootstrap and the
   frequency buckets work as for any plugin.

The harness's perplexity is then ``exp(-log p(text) / N)``, per word-level token of the
benchmark (``<eos>`` included): the Megatron-LM convention. :meth:`HFCausalLM.result_metadata`
adds, under ``plugin_metadata`` in the result JSON, the subword count and perplexity
(``exp(-log p / M)``), bits per UTF-8 byte of the text (``-log2 p / bytes``), the detokenizer,
segmentation, window and stride, and which audits apply: the probability audit cannot (no
distribution over the word vocabulary), the causality audit does.

The harness hands the plugin each stream whole (``score_stream``, the whole-stream seam of
:mod:`harness.plugin`), for the evaluation and for the causality audit's pass alike: the plugin
never sees the dataset's splits and never guesses which one it is scoring, and the audit checks
the path that produced the figure.

Modules: :mod:`~harness.plugins.hf.loading` (the model, its tokenizer and their checks),
:mod:`~harness.plugins.hf.detokenize` and :mod:`~harness.plugins.hf.lm_eval_pages` (step 1),
:mod:`~harness.plugins.hf.attribution` (steps 2 and 4), :mod:`~harness.plugins.hf.windows` (step
3), :mod:`~harness.plugins.hf.model` (the plugin's model).
"""

from harness.plugins.hf.loading import load_model
from harness.plugins.hf.model import HFCausalLM

__all__ = ["HFCausalLM", "load_model"]
