"""What the tests share, in one place (as warehouse keeps tests/common): the suite's apps and wallets, real servers
started for a test (gunicorn, nginx, PostgreSQL, SeaweedFS, anvil, Chromium), real peers (a webhook receiver, SSE
clients, a lying upstream, a failing JSON-RPC endpoint), and the console's and backups' steps. Fixtures stay in the
conftest.py files; a test module imports helpers from here, never from another test module's conftest."""
