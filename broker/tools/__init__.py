"""The `logbus` subcommands, one module each; broker/cli.py holds the table."""


class CommandError(Exception):
    """A failure to report as one line, without a traceback."""
