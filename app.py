"""The app that `flask --app app` and `gunicorn app:app` serve. A setting that cannot be read stops the command
with one line naming each such variable, not a traceback."""

from identity import create_app
from identity.config import SettingsError

try:
    app = create_app()
except SettingsError as error:
    raise SystemExit(error.exit_message()) from None
