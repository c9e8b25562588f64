"""One scenario through the Python client that openapi-python-client generates from the live /openapi.json.

Only generated code talks to the service: the operations (`api.identities.<operationId in snake case>`),
the models, and the client class, configured for the document's apiKey scheme. Each step is a method
of `Scenario`, run in the order of STEPS; to cover a new route, add a method and name it in STEPS
(tests/clients/ts/scenario.ts holds the same steps for the TypeScript client).
"""

import importlib
import uuid
from http import HTTPStatus

PACKAGE = "identity_service_client"
STEPS = (
    "health_and_readiness", "create", "fetch", "not_modified", "conflict", "content", "list_and_follow_next",
    "search", "patch_if_match", "precondition_failed", "remove_then_gone", "history", "feed", "problems",
)


class Scenario:
    """`keys`: admin (an Admin key), user (a User key of `user_wallet`), limited (a key on a 429-prone budget)."""

    def __init__(self, base_url, keys, user_wallet):
        self.generated = importlib.import_module(PACKAGE)
        self.op = lambda name: importlib.import_module(f"{PACKAGE}.api.identities.{name}")
        self.models = importlib.import_module(f"{PACKAGE}.models")
        self.base_url = base_url
        self.keys = keys
        self.user_wallet = user_wallet
        self.admin = self.client(keys["admin"])
        self.user = self.client(keys["user"])
        self.tag = uuid.uuid4().hex[:12]  # so that the scenario's content is new on every run
        self.done = []

    def client(self, key):
        # The document's security scheme is an apiKey in the x-api-key header: the generated client's
        # own settings for it, with no prefix.
        return self.generated.AuthenticatedClient(
            base_url=self.base_url, token=key, prefix="", auth_header_name="x-api-key",
            raise_on_unexpected_status=True,
        )

    def run(self):
        for step in STEPS:
            getattr(self, step)()
            self.done.append(step)
        return self.done

    # -- steps -----------------------------------------------------------------------------------

    def health_and_readiness(self):
        anonymous = self.generated.Client(base_url=self.base_url, raise_on_unexpected_status=True)
        for name in ("get_health", "get_readiness"):
            answer = self.op(name).sync_detailed(client=anonymous)
            assert answer.status_code == HTTPStatus.OK, answer
            assert isinstance(answer.parsed, self.models.Status)

    def create(self):
        body = self.models.IdentityCreate(
            display_name=f"Ada Lovelace {self.tag}", description="First programmer",
            image="https://example.org/ada.png", external_reference="https://example.org/ada",
        )
        answer = self.op("create_identity").sync_detailed(client=self.user, body=body)
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        self.identity = answer.parsed
        assert isinstance(self.identity, self.models.Identity)
        assert self.identity.status == self.models.IdentityStatus.COMPLETE
        assert answer.headers["Location"] == f"/identity/{self.identity.identity_id}"
        self.body = body

    def fetch(self):
        answer = self.op("get_identity").sync_detailed(self.identity.identity_id, client=self.user)
        assert answer.status_code == HTTPStatus.OK
        assert answer.parsed.identity_id == self.identity.identity_id
        assert answer.parsed.creator.wallet == self.user_wallet
        self.etag = answer.headers["ETag"]

    def not_modified(self):
        answer = self.op("get_identity").sync_detailed(
            self.identity.identity_id, client=self.user, if_none_match=self.etag
        )
        assert answer.status_code == HTTPStatus.NOT_MODIFIED and answer.parsed is None

    def conflict(self):
        answer = self.op("create_identity").sync_detailed(client=self.admin, body=self.body)
        assert answer.status_code == HTTPStatus.CONFLICT
        self.problem(answer.parsed, 409)
        assert answer.parsed.identity_id == self.identity.identity_id

    def content(self):
        answer = self.op("get_identity_content").sync_detailed(self.identity.identity_id, client=self.user)
        assert answer.status_code == HTTPStatus.OK
        assert isinstance(answer.parsed, self.models.IdentityContent)
        assert answer.parsed.display_name == self.body.display_name
        assert answer.headers["ETag"] == f'"{self.identity.identity_id.rsplit(":", 1)[1]}"'

    def list_and_follow_next(self):
        for n in range(2):
            body = self.models.IdentityCreate(display_name=f"Listed {n} {self.tag}")
            assert self.op("create_identity").sync_detailed(client=self.user, body=body).status_code == 201
        listing = self.op("list_identities")
        page = listing.sync_detailed(client=self.user, creator=self.user_wallet, limit=1).parsed
        assert isinstance(page, self.models.IdentityPage) and page.total >= 3
        seen = [identity.identity_id for identity in page.data]
        while page.next_:
            page = listing.sync_detailed(client=self.user, cursor=page.next_).parsed
            seen.extend(identity.identity_id for identity in page.data)
        assert len(seen) == len(set(seen)) == page.total

    def search(self):
        page = self.op("list_identities").sync_detailed(client=self.user, q=f"ada {self.tag}").parsed
        assert [identity.identity_id for identity in page.data] == [self.identity.identity_id]

    def patch_if_match(self):
        fetched = self.op("get_identity").sync_detailed(self.identity.identity_id, client=self.admin)
        self.stale_etag = fetched.headers["ETag"]
        body = self.models.IdentityPatch(
            status=self.models.IdentityPatchStatus.PENDING, num_positions=2**53 - 1, vault_id="4242"
        )
        answer = self.op("update_identity").sync_detailed(
            self.identity.identity_id, client=self.admin, body=body, if_match=self.stale_etag
        )
        assert answer.status_code == HTTPStatus.OK, answer.content
        assert answer.parsed.num_positions == 2**53 - 1 and answer.parsed.status == self.models.IdentityStatus.PENDING

    def precondition_failed(self):
        body = self.models.IdentityPatch(status=self.models.IdentityPatchStatus.COMPLETE)
        answer = self.op("update_identity").sync_detailed(
            self.identity.identity_id, client=self.admin, body=body, if_match=self.stale_etag
        )
        assert answer.status_code == HTTPStatus.PRECONDITION_FAILED
        self.problem(answer.parsed, 412)

    def remove_then_gone(self):
        body = self.models.IdentityPatch(status=self.models.IdentityPatchStatus.REMOVED)
        answer = self.op("update_identity").sync_detailed(self.identity.identity_id, client=self.admin, body=body)
        assert answer.status_code == HTTPStatus.OK
        gone = self.op("get_identity").sync_detailed(self.identity.identity_id, client=self.user)
        assert gone.status_code == HTTPStatus.GONE
        self.problem(gone.parsed, 410)
        assert gone.parsed.identity_id == self.identity.identity_id

    def history(self):
        answer = self.op("list_identity_changes").sync_detailed(self.identity.identity_id, client=self.admin)
        assert answer.status_code == HTTPStatus.OK
        kinds = [entry.kind for entry in answer.parsed.data]
        assert kinds == [self.models.ChangeKind.CREATED, self.models.ChangeKind.CHANGED, self.models.ChangeKind.CHANGED]

    def feed(self):
        feed = self.op("list_changes")
        after, entries = 0, []
        while True:
            page = feed.sync_detailed(client=self.admin, after=after, limit=1000).parsed
            assert isinstance(page, self.models.ChangeFeed)
            if not page.data:
                break
            entries.extend(page.data)
            after = page.next_after
        mine = [entry for entry in entries if entry.identity_id == self.identity.identity_id]
        assert len(mine) == 3 and [entry.seq for entry in entries] == sorted(entry.seq for entry in entries)

    def problems(self):
        """Each documented error the generated client can provoke parses into its Problem model."""
        unknown = "did:identity:ipfs:bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa"
        models, create = self.models, self.op("create_identity")
        cases = {
            401: lambda: self.op("get_identity").sync_detailed(unknown, client=self.client("idsk_wrong")),
            404: lambda: self.op("get_identity").sync_detailed(unknown, client=self.user),
            400: lambda: self.op("list_changes").sync_detailed(client=self.user, limit=0),
            403: lambda: create.sync_detailed(
                client=self.user, body=models.IdentityCreate(display_name=f"Not mine {self.tag}", creator="0x" + "ab" * 20)
            ),
            413: lambda: create.sync_detailed(
                client=self.user, body=models.IdentityCreate(display_name="Large", description="x" * 70_000)
            ),
            422: lambda: create.sync_detailed(
                client=self.user, body=models.IdentityCreate(display_name="Bad image", image="ftp://example.org/a.png")
            ),
        }
        for status, call in cases.items():
            answer = call()
            assert answer.status_code == status, (status, answer.content)
            self.problem(answer.parsed, status)
        assert self.problem_of(cases[400]()).errors.additional_properties["limit"]
        # A key with a small create budget: the budget spent, the next create is a 429 problem.
        limited = self.client(self.keys["limited"])
        for n in range(100):
            answer = create.sync_detailed(client=limited, body=models.IdentityCreate(display_name=f"Budget {n} {self.tag}"))
            if answer.status_code == HTTPStatus.TOO_MANY_REQUESTS:
                self.problem(answer.parsed, 429)
                assert int(answer.headers["Retry-After"]) >= 0
                break
        else:
            raise AssertionError("the limited key never ran out of its create budget")

    def problem(self, parsed, status):
        assert isinstance(parsed, self.models.Problem), parsed
        assert parsed.status == status and parsed.title and parsed.detail

    def problem_of(self, answer):
        return answer.parsed
