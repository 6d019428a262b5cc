"""The old home of the MLflow pyfunc wrapper, now `psyattrs.experiments.pyfunc` (training logs it,
serving loads it, so it sits below both).

Kept because models already logged to MLflow stores were pickled with the class path
`psyattrs.serving.pyfunc.AttributesPyfunc`: unpickling them imports this module and finds the class
here. New code imports `psyattrs.experiments.pyfunc`.
"""

from psyattrs.experiments.pyfunc import *  # noqa: F401,F403  (every public name of the old module)
from psyattrs.experiments.pyfunc import AttributesPyfunc  # noqa: F401  (the pickled class path)
