"""A view's decorators below blp.route sit in any order: what a request must pass (auth.access) is checked by the
blueprint's before_request hook before any of them runs, and flask-smorest's decorators document and serve the
same in every order. Held here on throwaway views, one per order of the same four decorators."""

import re
from itertools import permutations

import pytest
from marshmallow import Schema, fields

from identity.web import Blueprint, budgets
from identity.web import blp as api_blueprint
from identity.web.answers import BODY, answers
from identity.web.auth import ACCESS, access, check_access


class NameSchema(Schema):
    name = fields.String(required=True)


class GreetingSchema(Schema):
    greeting = fields.String(required=True)


DECORATORS = {
    "access": lambda order: access(budgets.creates, role="Admin"),
    "doc": lambda order: Blueprint.doc(operationId=f"greet{order}", responses=answers(BODY, "AdminOnly")),
    "arguments": lambda order: BLUEPRINTS[order].arguments(NameSchema, example={"name": "Ada"}),
    "response": lambda order: BLUEPRINTS[order].response(200, GreetingSchema, example={"greeting": "Hello, Ada"}),
}
ORDERS = list(permutations(DECORATORS))
BLUEPRINTS = {}


@pytest.fixture
def orders(app):
    """Each order of DECORATORS, as the view of POST /order<n>/greet on a blueprint of its own."""
    api = app.extensions["flask-smorest"]["blp_name_to_api"][api_blueprint.name]
    for number, order in enumerate(ORDERS):
        BLUEPRINTS[number] = blueprint = Blueprint(f"order{number}", __name__, url_prefix=f"/order{number}")
        blueprint.before_request(check_access)

        def greet(person):
            return {"greeting": f"Hello, {person['name']}"}

        for name in reversed(order):  # the first named sits right under blp.route, as it would be written
            greet = DECORATORS[name](number)(greet)
        blueprint.route("/greet", methods=["POST"], endpoint="greet")(greet)
        api.register_blueprint(blueprint)
    return range(len(ORDERS))


def test_every_order_answers_alike_and_authenticates_before_it_reads_the_body(orders, client, admin_key, user_key):
    answered = set()
    for number in orders:
        path = f"/order{number}/greet"
        unauthenticated = client.post(path, data=b"{not json")
        assert unauthenticated.status_code == 401, ORDERS[number]
        assert unauthenticated.headers["WWW-Authenticate"]
        # A valid key whose role the route does not take: 403, before the body is read either.
        assert client.post(path, data=b"{not json", headers={"x-api-key": user_key}).status_code == 403
        headers = {"x-api-key": admin_key}
        assert client.post(path, data=b"{not json", content_type="application/json", headers=headers).status_code == 400
        assert client.post(path, json={"nom": "Ada"}, headers=headers).status_code == 422
        greeted = client.post(path, json={"name": "Ada"}, headers=headers)
        assert greeted.status_code == 200 and "X-RateLimit-Remaining" in greeted.headers
        answered.add((greeted.get_data(), greeted.mimetype))
    assert answered == {(b'{"greeting":"Hello, Ada"}', "application/json")}


def test_every_order_is_documented_alike(orders, client):
    document = client.get("/openapi.json").get_json()
    operations = []
    for number in orders:
        operation = dict(document["paths"][f"/order{number}/greet"]["post"])
        assert operation.pop("operationId") == f"greet{number}"
        operation.pop("tags")
        operations.append(operation)
    assert all(operation == operations[0] for operation in operations)
    responses = operations[0]["responses"]
    assert responses["401"] == {"$ref": "#/components/responses/Unauthorized"}
    assert responses["403"] == {"$ref": "#/components/responses/AdminOnly"}
    assert responses["422"] == {"$ref": "#/components/responses/InvalidFields"}
    assert operations[0]["requestBody"]["content"]["application/json"]["example"] == {"name": "Ada"}


def test_every_view_of_the_api_that_needs_a_key_declares_its_access(app, client):
    # The document says which operations need a key (security); each of those has a view that checks one.
    document = client.get("/openapi.json").get_json()
    for rule in app.url_map.iter_rules():
        if not rule.endpoint.startswith(f"{api_blueprint.name}."):
            continue
        check = getattr(app.view_functions[rule.endpoint], ACCESS, None)
        path = re.sub(r"<(?:[^:>]*:)?([^>]+)>", r"{\1}", rule.rule)  # /identity/<a:b> -> /identity/{b}
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            operation = document["paths"].get(path, {}).get(method.lower())
            if operation is not None and operation["security"]:
                assert check is not None, (rule.rule, method)


@pytest.mark.parametrize("method, path", [
    ("POST", "/identity"), ("POST", "/identities/"), ("PATCH", "/identities/did:identity:ipfs:x"), ("POST", "/keys"),
])
def test_the_api_asks_for_a_key_before_it_reads_a_body(client, method, path):
    answer = client.open(path, method=method, data=b"{not json", content_type="text/plain")
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"]


def test_options_is_answered_by_flask_without_a_key_or_a_budget(client):
    answer = client.options("/identities")
    assert answer.status_code == 200
    assert set(answer.headers["Allow"].split(", ")) == {"GET", "HEAD", "POST", "OPTIONS"}
    assert "X-RateLimit-Remaining" not in answer.headers
