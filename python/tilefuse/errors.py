"""The one exception type users see. The CLI prints it as a single line."""


class TilefuseError(Exception):
    """A user-facing error: `location` (file:line:col or a name) plus a message."""

    def __init__(self, message: str, location: str | None = None):
        self.message = message
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class GroupFailed(TilefuseError):
    """The fusion stage failed on these fusion groups (by name): the driver
    may leave them to IREE and keep the other groups."""

    def __init__(
        self, message: str, groups, location: str | None = None, reasons: dict | None = None
    ):
        self.groups = tuple(groups)
        self.reasons = dict(reasons or {})  # group name -> why, where each has its own
        super().__init__(message, location)


class GroupsLeftToIree(GroupFailed):
    """Fusion groups no tilefuse kernel takes: not a failure (--strict
    allows it), the driver leaves them to IREE's formation and compiles
    again."""
