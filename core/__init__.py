"""The ground floor of the toolkit: what the builder, the harness, the baselines and the
leaderboard share, importing none of them.

- :mod:`core.format`: the word-level benchmark format's constants (splits, ``<eos>``, ``<unk>``);
- :mod:`core.files`: checksums, the atomic writer, directory locks, stale temporaries;
- :mod:`core.cli`: the command lines' plumbing (one-line errors, exit statuses, option types);
- :mod:`core.devices`: the ``--device`` option, with its own :class:`~core.devices.DeviceError`;
- :mod:`core.catalogue`: the benchmarks' split files, checksums and download sources.
"""
