"""The one error type: bad input to the profiler (a message naming what is wrong)."""


class ProfileError(ValueError):
    """A model, batch, loss or optimizer the profiler cannot measure."""
