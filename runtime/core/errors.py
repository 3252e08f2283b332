"""The errors that mean "bad input": a user's option, file, table or location is wrong.

The command line answers any :class:`UserError` with its message and exit status 2, never a
traceback; the message names what is wrong and how to fix it.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input; the message says what is wrong and what to do instead."""

    heading = ""  # what the command line prints before the message (empty: the class's name)

    def title(self) -> str:
        return self.heading or type(self).__name__
