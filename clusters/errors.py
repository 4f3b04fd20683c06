"""The one error type the bed raises for problems a user can fix."""


class BedError(RuntimeError):
    """A bed problem with a message that says what went wrong and what to do."""
