"""Errors a user can cause, kept apart from programming errors.

The CLI turns a `SimapfError` into one line on stderr and exit status 2; anything else is a bug
and keeps its traceback. So raise these only for problems in what the user gave us (files,
YAML, impossible configurations), with a message that reads well on its own.
"""


class SimapfError(Exception):
    """Base class for problems in the user's input."""


class ConfigError(SimapfError):
    """A configuration file or object is unreadable or invalid.

    The message is a single line that names the file (when there is one), the object and the
    field path, so the user can go straight to the mistake.
    """
