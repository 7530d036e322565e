"""The one base of the toolkit's user-facing errors.

Every error a user can cause (a missing file, options that do not fit, a plugin that cannot
load, a corrupt checkpoint, a busy directory) is a :class:`ToolkitError`, whichever package
raises it; :func:`wikitext_toolkit_core.cli.run` catches this base alone. Standard library only: it imports
nothing.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """A user-facing error whose message is one line: the command lines print
    ``error: MESSAGE`` on stderr and exit with status 2. Anything not derived from it is a bug
    and keeps its traceback."""
