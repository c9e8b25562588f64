"""What most tests build on: the suite's wallets, an app with the suite's defaults, a migrated database."""

import signal
from pathlib import Path

from flask_migrate import upgrade

from identity import create_app
from identity.storage.database import db
from tests.common.live import UNLIMITED

ADMIN_WALLET = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
USER_WALLET = "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359"
OTHER_WALLET = "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB"


def make_app(database_url, **config):
    """An app on `database_url` (a URL, or the path of an SQLite file) with this suite's defaults."""
    if isinstance(database_url, Path):
        database_url = f"sqlite:///{database_url}"
    return create_app({"DATABASE_URL": database_url, "TESTING": True, **UNLIMITED, **config})


def without_last_login(identity):
    """An Identity object with its creator's last_login blanked: the one field a sign-in of the creator moves."""
    return {**identity, "creator": {**identity["creator"], "last_login": None}}


def migrate(database_url):
    app = make_app(database_url)
    with app.app_context():
        upgrade()
        db.engine.dispose()


def restore_ctrl_c():
    """preexec_fn of a subprocess that must stop on SIGINT even when this run inherited it ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
