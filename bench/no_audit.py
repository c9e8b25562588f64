"""The project's app with its audit entries left out, for bench/audit.py alone: the "without" of an Admin write
served as users serve it (gunicorn.conf.py behind deploy/nginx.conf).

    gunicorn -c gunicorn.conf.py bench.no_audit:app      # DATABASE_URL as for app:app
"""

from app import app  # noqa: F401 - what gunicorn serves
from identity.core import audit

audit.record = lambda *args, **kwargs: None
