"""The one error every parser raises."""

from gpuprov.errors import InputError


class ParseError(InputError):
    def __init__(self, source: str, message: str):
        super().__init__(f"{source}: {message}")
        self.source = source
