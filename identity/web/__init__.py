"""The HTTP API: one blueprint, one module of views per resource registering on it (identities, changes,
keys, signin, webhooks, mirrors, health), and what every request passes through (web.hooks)."""

import flask_smorest

from .hooks import BodyParser, refuse_until_migrated


class Blueprint(flask_smorest.Blueprint):
    """flask-smorest's Blueprint with the service's body parser, through its ARGUMENTS_PARSER attribute."""

    ARGUMENTS_PARSER = BodyParser()


blp = Blueprint("identities", __name__, description="Fetch and create Identity records.")
blp.before_request(refuse_until_migrated)

# Each alias rule the API serves, with the documented rule it serves the same as: {(rule, method): rule}.
ALIASES = {}


def alias(*rules, of, methods=("GET",)):
    """Serve each of `rules` with the view below it, as it serves `of` (the contract's plural paths, and
    /identities/search): the same behaviour, documented once (web.openapi). Put it right below blp.route.

    The rules go to Flask through Blueprint.record, the hook Flask's own add_url_rule uses; flask-smorest
    documents only the rules given to blp.route.
    """

    def decorate(view):
        for number, rule in enumerate(rules):
            endpoint = f"{view.__name__}_alias_{number}"
            blp.record(lambda state, rule=rule, endpoint=endpoint: state.add_url_rule(
                rule, endpoint, view, methods=list(methods)))
            ALIASES.update({(rule, method): of for method in methods})
        return view

    return decorate


from . import audit, changes, health, identities, keys, mirrors, signin, webhooks  # noqa: E402,F401 - importing a module registers its views


def init_app(app):
    """Give `app` the API: the request class and JSON, the blueprint, its document, its errors, metrics and budgets."""
    from . import budgets, hooks, metrics, openapi, problems

    hooks.init_app(app)
    api = problems.ProblemApi(app, spec_kwargs=openapi.spec_kwargs())
    api.register_default_problem()
    openapi.init_app(app, api)
    api.register_blueprint(blp)
    openapi.document_aliases(app, api, ALIASES)
    problems.register_error_handlers(app)
    metrics.init_app(app)
    budgets.init_app(app)
    audit.init_app(app)
