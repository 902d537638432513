"""Run by Python at start-up when this folder is on PYTHONPATH (the executors' in tests/cluster):
hide the installed ``pravega_spark`` from this interpreter, as on executors where only the driver
has it. Drops the editable install's import hook and any path entry holding the package folder;
a zip of the package added later (``SparkContext.addPyFile``) still imports."""

import os
import sys

sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("__editable__")
                    and not getattr(f, "__module__", "").startswith("__editable__")]
sys.path[:] = [p for p in sys.path if not os.path.isdir(os.path.join(p or ".", "pravega_spark"))]
