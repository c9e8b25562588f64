"""The console's fixtures (a signed-in console), for the audit log's console tests."""

from tests.console.conftest import console, console_for  # noqa: F401 - fixtures, found by pytest here
