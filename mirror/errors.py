"""The mirror's own error, shared by the maker and its sources."""


class MirrorError(RuntimeError):
    """The mirror stopped because of a failure (a send that failed for good, a dead source thread...)."""
