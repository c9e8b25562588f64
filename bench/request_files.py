"""Which of the package's files a warm GET and a create run, in-process (the Flask test client): how far
a reader follows a request. `.venv/bin/python bench/request_files.py` prints both lists."""

import os
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def files_run(work):
    """The package's files (relative to identity/) whose code runs while `work()` runs."""
    package, files = str(ROOT / "identity"), set()

    def tracer(frame, event, arg):
        if frame.f_code.co_filename.startswith(package):
            files.add(os.path.relpath(frame.f_code.co_filename, package))

    sys.settrace(tracer)
    threading.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
        threading.settrace(None)
    return sorted(files)


def main():
    from flask_migrate import upgrade

    from identity import create_app, seed

    folder = tempfile.mkdtemp(prefix="bench-files-")
    unlimited = {"IDENTITY_RATELIMIT_READ": "1000000/second", "IDENTITY_RATELIMIT_CREATE": "1000000/second"}
    app = create_app({"DATABASE_URL": f"sqlite:///{folder}/identity.db", "TESTING": True, **unlimited})
    with app.app_context():
        upgrade()
    key = seed.issue_key(app, role="Admin")
    client, headers = app.test_client(), {"x-api-key": key}
    path = "/identity/" + client.post("/identity", json={"display_name": "warm"}, headers=headers).json["identity_id"]
    for number in range(3):  # warm: the key cached, the body made, every lazy import done
        client.get(path, headers=headers)
        client.post("/identity", json={"display_name": f"warm {number}"}, headers=headers)
    get = files_run(lambda: client.get(path, headers=headers))
    post = files_run(lambda: client.post("/identity", json={"display_name": "traced"}, headers=headers))
    print(f"a warm GET runs {len(get)} of the package's files: {', '.join(get)}")
    print(f"a create runs {len(post)}: {', '.join(post)}")


if __name__ == "__main__":
    main()
