"""The data plane's one error: input that cannot be written as a Hudi stream."""

from __future__ import annotations

from runtime.core.errors import UserError


class InputError(UserError, ValueError):
    """The input cannot be written as a Hudi stream; the message names the problem and the fix.

    Raised by :func:`runtime.data.workload.read_input` before anything is written.
    """
