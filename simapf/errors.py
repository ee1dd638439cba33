"""Errors a user can cause, kept apart from programming errors.

The CLI turns a `SimapfError` into one line on stderr and exit status 2; anything else is a bug
and keeps its traceback. So raise these only for problems in what the user gave us (files,
YAML, impossible configurations, their own policy code), with a message that reads well on its
own.
"""

from __future__ import annotations


class SimapfError(Exception):
    """Base class for problems in the user's input."""

    def __reduce__(self):
        # A run in a worker process (a sweep's, a comparison's) sends its error back pickled,
        # which drops the chain of causes and with it the traceback of the user's code behind
        # the error: its text goes along (None: there was none), for `simapf --debug`.
        return type(self), self.args, {**self.__dict__, "users_traceback_text": users_traceback(self)}


class ConfigError(SimapfError):
    """A configuration file or object is unreadable or invalid.

    The message is a single line that names the file (when there is one), the object and the
    field path, so the user can go straight to the mistake.
    """


class UserCodeError(SimapfError):
    """The user's own code (a LIST policy of theirs) raised, or returned what simapf cannot use.

    The message names the file and line in their code, the policy and the call; the exception
    they raised is the cause, whose traceback `simapf --debug` shows.
    """


def users_traceback(err: BaseException) -> str | None:
    """The traceback of the exception behind `err` that was raised outside simapf (in the user's
    code), as text: formatted here, or as it came along with an error from another process."""
    import traceback

    seen: BaseException | None = err
    while isinstance(seen, SimapfError):
        if "users_traceback_text" in seen.__dict__:
            return seen.__dict__["users_traceback_text"]
        seen = seen.__cause__
    return "".join(traceback.format_exception(seen)).rstrip() if seen is not None else None
