"""The ground floor of the toolkit: what the builder, the harness, the baselines and the
leaderboard share, importing none of them.

- :mod:`core.format`: the word-level benchmark format's constants (splits, ``<eos>``, ``<unk>``);
- :mod:`core.files`: checksums, the atomic writer, directory locks, stale temporaries;
- :mod:`core.errors`: :class:`~core.errors.ToolkitError`, the base of every user-facing error;
- :mod:`core.cli`: the command lines' plumbing (one-line errors, exit statuses, option types);
- :mod:`core.startup`: the tools' entry points (Ctrl-C while a tool imports is one line too);
- :mod:`core.devices`: the ``--device`` option, with its own :class:`~core.devices.DeviceError`;
- :mod:`core.threads`: the ``--threads N|auto`` option (fewer torch threads beside busy CPUs);
- :mod:`core.progress`: progress bars on a terminal, a line a minute in a log file;
- :mod:`core.catalogue`: the benchmarks' split files, checksums and download sources;
- :mod:`core.benchmarks`: where a dataset's split files are (packaged in ``core/data/``, in a data
  directory, in the cache), checked against their checksums; :mod:`core.download` fetches them;
- :mod:`core.ngrams`: n-gram overlap between a benchmark split's articles and any text;
- :mod:`core.bounded_json`: the reader of every JSON input, which refuses one nested too deep;
- :mod:`core.result_schema`: the result files' schema (:class:`~core.result_schema.ResultRecord`)
  and its versions.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("wikitext-toolkit")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0+unknown"
