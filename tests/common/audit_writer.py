"""A node of the audit log's two-node test (test_audit_nodes.py): `python -m tests.common.audit_writer DATABASE_URL NAME
COUNT GO` connects, says it is ready (the file GO.NAME.ready), waits for the file GO, then issues COUNT keys, each
with its audit entry, as fast as it can."""

import os
import sys
import time
from pathlib import Path

from identity import create_app
from identity.core import keys
from identity.storage.database import db


def main(database_url, name, count, go):
    app = create_app({"DATABASE_URL": database_url, "TESTING": True})
    with app.app_context():
        db.session.execute(db.select(1))  # connected before the start
        db.session.remove()
        Path(f"{go}.{name}.ready").touch()
        while not Path(go).exists():
            time.sleep(0.001)
        for number in range(count):
            keys.issue_key(f"0x{os.getpid() % 65536:04x}{number:036x}")
            db.session.remove()
    print(count)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
