"""User-facing errors, raised by both layers (the training side and the orchestration above it):
the CLI (``contrasweep.cli``, through ``contrasweep.errors``) prints them as one line and
exits with status 2."""


class UserError(Exception):
    """Bad input from the user (spec, override, file, name). The message names the bad value
    and what is allowed; it is printed without a traceback."""


class SpecError(UserError):
    """A value in a sweep spec or a ``--set`` override is invalid."""


class DataError(UserError):
    """A data source, column, split or protocol cannot be used as asked."""


class TrainingDiverged(RuntimeError):
    """The training loss became NaN or infinite: the trial failed (not bad input, so not a
    ``UserError``). Its state folder keeps a ``failure`` record, so a retry of the trial fails
    at once instead of training into the same divergence again (``trainables.loop``)."""


class ObjectiveNotFinite(TrainingDiverged):
    """The objective (the sweep's validation metric) was NaN or infinite at every validated
    epoch: no epoch can be the trial's best, so it has no best weights to keep or to test
    (``trainables.checkpointing.BestTracker.failure``). Fails the trial after its last epoch
    is reported, recorded like a divergence (a retry fails at once)."""


class ContractError(RuntimeError):
    """A method broke its contract with the loop (e.g. ``training_step`` returned no ``loss``):
    the message is the contract's own words, as ``contrasweep check-method`` prints them
    (``trainables.contract``), and fails the trial (not bad input: its code, not its values)."""
