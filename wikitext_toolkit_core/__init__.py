"""The ground floor of the toolkit: what the builder, the harness, the baselines and the
leaderboard share, importing none of them.

- :mod:`~wikitext_toolkit_core.format`: the word-level benchmark format's constants (splits,
  ``<eos>``, ``<unk>``);
- :mod:`~wikitext_toolkit_core.files`: checksums, the atomic writer, directory locks, stale
  temporaries;
- :mod:`~wikitext_toolkit_core.errors`: :class:`~wikitext_toolkit_core.errors.ToolkitError`, the
  base of every user-facing error;
- :mod:`~wikitext_toolkit_core.cli`: the command lines' plumbing (one-line errors, exit statuses,
  option types);
- :mod:`~wikitext_toolkit_core.startup`: the tools' entry points (Ctrl-C while a tool imports is
  one line too);
- :mod:`~wikitext_toolkit_core.devices`: the ``--device`` option, with its own
  :class:`~wikitext_toolkit_core.devices.DeviceError`;
- :mod:`~wikitext_toolkit_core.threads`: the ``--threads N|auto`` option (fewer torch threads
  beside busy CPUs);
- :mod:`~wikitext_toolkit_core.progress`: progress bars on a terminal, a line a minute in a log
  file;
- :mod:`~wikitext_toolkit_core.catalogue`: the benchmarks' split files, checksums and download
  sources;
- :mod:`~wikitext_toolkit_core.benchmarks`: where a dataset's split files are (packaged in
  ``wikitext_toolkit_core/data/``, in a data directory, in the cache), checked against their
  checksums; :mod:`~wikitext_toolkit_core.download` fetches them;
- :mod:`~wikitext_toolkit_core.ngrams`: n-gram overlap between a benchmark split's articles and
  any text;
- :mod:`~wikitext_toolkit_core.bounded_json`: the reader of every JSON input, which refuses one
  nested too deep;
- :mod:`~wikitext_toolkit_core.result_schema`: the result files' schema
  (:class:`~wikitext_toolkit_core.result_schema.ResultRecord`) and its versions;
- :mod:`~wikitext_toolkit_core.training_log`: the training logs' schema (the records ``baselines
  train`` writes and ``leaderboard`` reads) and its versions;
- :mod:`~wikitext_toolkit_core.audit_defaults`: the audits' default settings, which the harness
  applies and the leaderboard requires of what it ranks.

The name is the distribution's (``wikitext-toolkit``): a top-level package called ``core``, as this
one was, is shadowed by, or shadows, any other distribution's ``core``.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("wikitext-toolkit")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
