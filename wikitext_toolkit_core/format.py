"""The word-level benchmark format that the harness reads and ``wikitext_builder`` writes.

The conventions of PTB and WikiText (``docs/wikitext-format.md``): every dataset has these three
splits; a split's token stream is the whitespace-separated tokens of each line followed by
:data:`EOS`; words outside the vocabulary are written :data:`UNK`. Constants only (this module
imports nothing), shared by the harness, the leaderboard and ``wikitext_builder``.
"""

#: The splits of every dataset, in order.
SPLITS = ("train", "valid", "test")
#: The token closing every line of a split's stream (a blank line is a lone ``<eos>``).
EOS = "<eos>"
#: The token standing for any word outside the vocabulary.
UNK = "<unk>"
#: The UTF-8 byte-order mark: an encoding marker, skipped at the start of a split file.
UTF8_BOM = b"\xef\xbb\xbf"
