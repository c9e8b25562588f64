"""The HTTP API: one blueprint, one module of views per resource registering on it (identities, changes,
keys, signin, webhooks, mirrors, health), and what every request passes through (web.hooks)."""

import flask_smorest

from .auth import check_access
from .hooks import BodyParser, refuse_until_migrated


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the service's body parser, through its ARGUMENTS_PARSER attribute."""

    ARGUMENTS_PARSER = BodyParser()


blp = Blueprint("identities", __name__, description="Fetch and create Identity records.")
blp.before_request(refuse_until_migrated)
blp.before_request(check_access)  # what each view declares with auth.access, before any of its decorators runs

# The rules the API serves besides the documented ones, each as the view of the documented rule it names for
# its method (the contract's plural paths, /identities/search, and POST's trailing slashes): the same behaviour,
# the same budget, documented once (openapi.document_aliases). {(rule, method): documented rule}
ALIASES = {
    ("/identities/<identity_id:identity_id>", "GET"): "/identity/<identity_id:identity_id>",
    ("/identities/<identity_id:identity_id>", "PATCH"): "/identity/<identity_id:identity_id>",
    ("/identities/<identity_id>/content", "GET"): "/identity/<identity_id>/content",
    ("/identities/<identity_id>/changes", "GET"): "/identity/<identity_id>/changes",
    ("/identities", "POST"): "/identity",
    ("/identity/", "POST"): "/identity",
    ("/identities/", "POST"): "/identity",
    ("/identities/search", "GET"): "/identities",
    ("/identities/", "GET"): "/identities",
}


def serve_aliases(state):
    """Add each rule of ALIASES to the app, as an endpoint of its own that runs the documented rule's view
    (Blueprint.record, the hook Flask's own add_url_rule uses; flask-smorest documents only blp.route's rules)."""
    prefix = f"{state.name_prefix}.{state.name}.".lstrip(".")
    for number, ((rule, method), of) in enumerate(ALIASES.items()):
        served = next(found for found in state.app.url_map.iter_rules()
                      if found.rule == of and method in found.methods and found.endpoint.startswith(prefix))
        state.add_url_rule(rule, f"{served.endpoint[len(prefix):]}_alias_{number}",
                           state.app.view_functions[served.endpoint], methods=[method])


from . import audit, changes, health, identities, keys, mirrors, signin, webhooks  # noqa: E402,F401 - importing a module registers its views

blp.record(serve_aliases)  # after the views' own rules, which it looks up


def init_app(app):
    """Give `app` the API: the request class and JSON, the blueprint, its document, its errors, metrics and budgets."""
    from . import answers, budgets, hooks, metrics, openapi, problems

    hooks.init_app(app)
    api = problems.ProblemApi(app, spec_kwargs=openapi.spec_kwargs(answers.SharedProblems()))
    api.register_default_problem()
    answers.init_app(api)
    openapi.init_app(app, api)
    api.register_blueprint(blp)
    openapi.document_aliases(app, api, ALIASES)
    problems.register_error_handlers(app)
    metrics.init_app(app)
    budgets.init_app(app)
    audit.init_app(app)
