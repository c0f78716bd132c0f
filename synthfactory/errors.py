"""Errors a user can act on: the CLI prints them as one line and exits 1."""


class SynthfactoryError(Exception):
    """A bad input or state, with a message naming the input and the problem."""
