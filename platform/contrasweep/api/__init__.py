"""contrasweep's Python API (docs/api.md): what a notebook or script calls instead of the
command line, which calls it too. ``run``, ``resume`` and ``extend`` drive a sweep and return it;
``plan`` says what one will cost; ``load`` reads a sweep back as a ``Sweep`` whose tables are
pandas DataFrames; ``list_sweeps`` is ``contrasweep list`` as a DataFrame. Reading needs no Ray.

The room sits below ``contrasweep.cli`` at the top of the package (``import contrasweep`` loads
it on first use of a name). May import: ``contrasweep.errors``, ``contrasweep.spec`` (a sweep
name's rule), ``contrasweep.folder``, ``contrasweep.tracking``, ``contrasweep.console`` (the list's
rows), ``contrasweep.runner`` (a sweep's driver; a dead driver's sweep set straight), ``contrasweep.search``
(a spec checked by its searcher), ``dashboards`` (a sweep's record,
the report, the comparison); pandas, MLflow. Never Ray, outside a function that runs a sweep.
"""

import os

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bar per spec read; a user's setting wins

from contrasweep.api.launch import Plan, extend, plan, resume, run  # after the setting, before MLflow is imported
from contrasweep.api.reading import list_sweeps
from contrasweep.api.sweep import Sweep, load

__all__ = ["Plan", "Sweep", "extend", "list_sweeps", "load", "plan", "resume", "run"]
