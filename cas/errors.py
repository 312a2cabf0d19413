"""The one base of every error earshot raises on purpose.

Each concrete error is defined next to the code that raises it and carries its
facts; only ``earshot.cli`` turns errors into messages and exit codes.
"""


class EarshotError(Exception):
    """Base of earshot's own errors: a one-line message that says what to do next."""
