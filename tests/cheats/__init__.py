"""Plugins that beat the audits once, each in its own way (issue 73), and the honest base they
cheat from: each module's docstring says, in its first line, how it picks its moment.

Every cheat mixes the target into the honest bigram's normalised distribution
(:mod:`tests.cheats._base`), so the probability audit cannot see it: only the causality audit,
or a figure no better than the honest base's, stops it.
"""

#: The cheats, as plugin modules of this package, in the order of the issue's table.
CHEATS = (
    "stack",
    "progress_bar",
    "gc_plan",
    "patched_pass",
    "frame_grid",
    "stream_vote",
    "bigram_gate",
    "frequent_words",
    "top_k",
)
#: The honest base.
HONEST = "honest"
