"""Commands the service tells an operator to run, spelled so that they work where they are printed.

A bare `flask` may be another project's, or absent: the hint names the flask of the Python that runs
the service (the project's .venv), relative to the working directory when it is inside it.
"""

import os
import shlex
import sys


def flask_command(*args):
    """`<this environment's flask> --app app ARGS`, as one shell line."""
    flask = os.path.join(os.path.dirname(sys.executable), "flask")
    if not os.path.exists(flask):
        flask = "flask"
    else:
        relative = os.path.relpath(flask)
        if not relative.startswith(".."):
            flask = relative if os.sep in relative else os.path.join(".", relative)
    return " ".join([shlex.quote(flask), "--app", "app", *map(shlex.quote, args)])


def upgrade_command():
    """The command that brings the database's schema to the latest migration."""
    return flask_command("db", "upgrade")
