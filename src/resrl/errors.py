"""The one exception type for bad user input, so that the CLI can tell it from a bug.

`InputError` (a ValueError) means: a config key, a data row, a file, a command-line value or a
user-supplied function is wrong, and the message names it. The `resrl` command prints it as one
line (exit 2). Any other exception — torch's own ValueErrors from deep inside training included —
is an internal error and keeps its traceback.
"""


class InputError(ValueError):
    """Bad user input; the message names the key, row, file or option."""


class DataError(InputError):
    """A data file or row that cannot be used; the message names the file (and row)."""


__all__ = ["InputError", "DataError"]
