"""The plain-Flask floor: Flask doing exactly the work of bench/floor.py, and nothing else.

The same Floor object does the work (key lookup, validation, content addressing, the same SQL and
the same JSON bytes); Flask routes the request, hands the view its `request`, and sends a
`Response`. Beside the bare floor, it says what Flask itself costs, so that `make bench` can tell
the cost of Flask from the cost of the layers the project adds on top of it.

    gunicorn bench.plain:app      # DATABASE_URL=sqlite:////path/to/identity.db, migrated by `flask db upgrade`
"""

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from bench.floor import Floor, Refusal, request_id_of

ROUTES = ("/identity", "/identities")


def create_app(floor=None):
    """A Flask app serving `floor`'s work (Floor.from_env() by default)."""
    floor = floor or Floor.from_env()
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = floor.max_body_bytes

    def answer(status, payload, headers=(), mimetype="application/json"):
        response = Response(payload, status=status, mimetype=mimetype, headers=list(headers))
        response.headers["X-Request-ID"] = request_id_of(request.headers.get("X-Request-ID", ""))
        return response

    def get_identity(identity_id):
        return answer(*floor.get(request.headers.get("x-api-key"), identity_id))

    def create_identity():
        wallet, role = floor.authenticate(request.headers.get("x-api-key"))
        if request.mimetype != "application/json":
            raise Refusal(415, "The body must be sent as Content-Type: application/json.")
        return answer(*floor.create(wallet, role, request.get_data()))

    def ready():
        floor.ready()
        return answer(200, b'{"status":"ok"}')

    for route in ROUTES:
        app.add_url_rule(f"{route}/<identity_id>", f"get{route}", get_identity, methods=["GET"])
        app.add_url_rule(route, f"create{route}", create_identity, methods=["POST"])
    app.add_url_rule("/healthz", "healthz", lambda: answer(200, b'{"status":"ok"}'))
    app.add_url_rule("/readyz", "readyz", ready)

    @app.errorhandler(Refusal)
    def refused(refusal):
        return answer(refusal.status, refusal.body(), refusal.headers, "application/problem+json")

    @app.errorhandler(HTTPException)
    def http_error(error):
        refusal = Refusal(error.code, error.description, [(k, v) for k, v in error.get_headers() if k != "Content-Type"])
        return refused(refusal)

    return app


app = create_app()
