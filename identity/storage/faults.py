"""What went wrong with the database, in the words an operator acts on: locked, read-only, disk full."""

import sqlite3

# SQLite's primary result codes (https://sqlite.org/rescode.html); an extended code carries one in its low byte.
_SQLITE_CAUSES = {
    5: "locked (another connection holds the write lock)",  # SQLITE_BUSY
    6: "locked (a table is locked)",  # SQLITE_LOCKED
    8: "read-only (the database file or its folder cannot be written)",  # SQLITE_READONLY
    10: "disk I/O error",  # SQLITE_IOERR
    11: "corrupt database file",  # SQLITE_CORRUPT
    13: "disk full",  # SQLITE_FULL
    14: "cannot open the database file",  # SQLITE_CANTOPEN
}
# PostgreSQL's SQLSTATE classes and codes (appendix A of its manual).
_POSTGRES_CAUSES = {
    "53100": "disk full",
    "25006": "read-only (the server or transaction is read-only)",
    "55P03": "locked (lock not available)",
    "40P01": "locked (deadlock)",
    "57014": "query canceled (statement timeout)",
}
_POSTGRES_CLASSES = {"08": "connection lost or refused", "53": "server out of resources", "57": "server shutting down"}


SQLITE_BUSY = 5


def sqlite_code(error):
    """SQLite's primary result code of `error` (a driver error, or SQLAlchemy's wrapping one), or None."""
    code = getattr(getattr(error, "orig", None) or error, "sqlite_errorcode", None)
    return None if code is None else code & 0xFF


def cause(error):
    """A short phrase naming the cause of a database error (an SQLAlchemy DBAPIError or a driver error)."""
    original = getattr(error, "orig", None) or error
    if isinstance(original, sqlite3.Error):
        code = sqlite_code(original)
        if code in _SQLITE_CAUSES:
            return _SQLITE_CAUSES[code]
        return f"{getattr(original, 'sqlite_errorname', None) or type(original).__name__}: {original}"
    sqlstate = getattr(original, "sqlstate", None)
    if sqlstate:
        if sqlstate in _POSTGRES_CAUSES:
            return _POSTGRES_CAUSES[sqlstate]
        if sqlstate[:2] in _POSTGRES_CLASSES:
            return f"{_POSTGRES_CLASSES[sqlstate[:2]]} (SQLSTATE {sqlstate})"
        return f"SQLSTATE {sqlstate}"
    # A connection that failed has no SQLSTATE; libpq's first line names the host, the port and why:
    # 'connection failed: connection to server at "10.0.0.5", port 5432 failed: Connection refused'.
    first_line = str(original).strip().splitlines()[0] if str(original).strip() else ""
    return f"{type(original).__name__}: {first_line}" if first_line else type(original).__name__
