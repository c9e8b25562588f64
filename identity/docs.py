"""The service describes itself: the OpenAPI document's extras and the interactive page at /docs.

flask-smorest writes /openapi.json from the blueprint's decorators and schemas, and renders /docs with
Swagger UI. Swagger UI's scripts and styles come from the installed flask-swagger-ui package and are
served here, so the page needs no network but the service.
"""

from importlib.resources import files

from flask import Blueprint

from .auth import HEADER
from .schemas import documented_validators


def init_app(app, api):
    """Complete `api`'s document and serve the Swagger UI assets that /docs loads."""
    api.spec.components.security_scheme("ApiKeyAuth", {"type": "apiKey", "in": "header", "name": HEADER})
    api.ma_plugin.converter.add_attribute_function(documented_validators)
    assets = Blueprint(
        "swagger_ui_assets",
        __name__,
        static_folder=str(files("flask_swagger_ui") / "dist"),
        static_url_path=app.config["OPENAPI_SWAGGER_UI_URL"].rstrip("/"),
    )
    app.register_blueprint(assets)
