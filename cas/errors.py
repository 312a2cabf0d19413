"""The one base of every error earshot raises on purpose.

Each concrete error is defined next to the code that raises it and carries its
facts, and its exit code, as click's exceptions do; only ``earshot.cli``
turns errors into a one-line message and that code.
"""


class EarshotError(Exception):
    """Base of earshot's own errors: a one-line message that says what to do next."""

    #: The process's exit status when this error ends a command (1: an error;
    #: see the README's exit codes).
    exit_code = 1
