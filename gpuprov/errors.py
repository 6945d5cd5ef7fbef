"""Errors that end a command with a one-line message.

`InputError` is bad input or configuration: exit code 2, and by contract nothing was
changed on any host. `EnvironmentProblem` is a missing prerequisite on the controller
(no Docker engine, no debootstrap): also exit 2, since nothing ran. `ClaimLost`: a run
that ran lost the ledger's hold on its hosts, so its end was not recorded (exit 1).
"""


class GpuprovError(Exception):
    exit_code = 2


class InputError(GpuprovError):
    """Bad input: unknown node, malformed file, impossible option."""


class EnvironmentProblem(GpuprovError):
    """A controller prerequisite is missing; the message says how to fix it."""


class CommandFailed(GpuprovError):
    """An external command the controller needed failed."""

    exit_code = 1


class ClaimLost(GpuprovError):
    """The shared ledger let go of a running run's hosts (its connection dropped): another
    controller may have run on them meanwhile, so the run's end is not recorded."""

    exit_code = 1
