"""One scenario through the Python client that openapi-python-client generates from the live /openapi.json.

Only generated code talks to the service: the operations (`api.identities.<operationId in snake case>`),
the models, and the client class, configured for the document's apiKey scheme. Each step is a method
of `Scenario`, run in the order of STEPS; to cover a new route, add a method and name it in STEPS
(tests/clients/ts/scenario.ts holds the same steps for the TypeScript client).
"""

import importlib
import secrets
import time
import uuid
from http import HTTPStatus

from tests.clients.wallet_steps import WALLET_STEPS, WalletSteps

PACKAGE = "identity_service_client"
STEPS = (
    "health_and_readiness", "create", "fetch", "not_modified", "conflict", "content", "list_and_follow_next",
    "search", "patch_if_match", "precondition_failed", "remove_then_gone", "history", "feed", "long_poll",
    "long_poll_times_out", "problems", "me", "create_key", "list_keys_and_follow_next", "get_key",
    "read_key_is_read_only", "rotate_key_with_grace", "rotate_my_key", "revoke_key", "revoke_my_key", "get_user",
    "key_problems", "webhooks", "feed_with_docs", "mirrors", *WALLET_STEPS,
)
# How long a revoked key may still be accepted: the server's IDENTITY_KEY_CACHE_SECONDS, and some slack.
REFUSAL_DEADLINE_SECONDS = 10


class Scenario(WalletSteps):
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
            try:
                getattr(self, step)()
            except AssertionError as error:
                raise AssertionError(f"step {step} failed: {error}") from error
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
        self.head = after

    def long_poll(self):
        """feed=longpoll with entries after `after`: the page at once, as JSON (ChangeFeed)."""
        answer = self.op("list_changes").sync_detailed(
            client=self.admin, feed=self.models.ListChangesFeed.LONGPOLL, timeout=1000, after=0, limit=2
        )
        assert answer.status_code == HTTPStatus.OK, answer.content
        assert answer.headers["Content-Type"].startswith("application/json")
        page = answer.parsed
        assert isinstance(page, self.models.ChangeFeed) and len(page.data) == 2
        assert page.next_after == page.data[-1].seq and page.data[0].kind == self.models.ChangeKind.CREATED

    def long_poll_times_out(self):
        """feed=longpoll after the head: no entry comes within timeout, so an empty page that stays at after."""
        answer = self.op("list_changes").sync_detailed(
            client=self.admin, feed=self.models.ListChangesFeed.LONGPOLL, timeout=200, after=self.head
        )
        assert answer.status_code == HTTPStatus.OK, answer.content
        assert isinstance(answer.parsed, self.models.ChangeFeed)
        assert answer.parsed.data == [] and answer.parsed.next_after == self.head

    def problems(self):
        """Each documented error the generated client can provoke parses into its Problem model."""
        unknown = "did:identity:ipfs:bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa"
        models, create = self.models, self.op("create_identity")
        cases = {
            401: lambda: self.op("get_identity").sync_detailed(unknown, client=self.client("idsk_wrong")),
            404: lambda: self.op("get_identity").sync_detailed(unknown, client=self.user),
            400: lambda: self.op("list_changes").sync_detailed(client=self.user, limit=0),
            # A position beyond every seq the feed ever issued (a restore of an older backup, another service).
            409: lambda: self.op("list_changes").sync_detailed(client=self.user, after=self.head + 1_000_000),
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
        assert self.problem_of(cases[409]()).feed_end >= self.head
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

    def me(self):
        answer = self.op("get_me").sync_detailed(client=self.user)
        assert answer.status_code == HTTPStatus.OK, answer.content
        assert isinstance(answer.parsed, self.models.Me)
        assert answer.parsed.user.wallet == self.user_wallet and answer.parsed.key.wallet == self.user_wallet
        assert answer.parsed.key.scope == self.models.KeyScope.WRITE
        assert self.keys["user"] not in answer.content.decode()

    def create_key(self):
        """An Admin issues the user a read-only, expiring, labelled key: its plaintext is in this 201 only."""
        body = self.models.KeyCreate(
            wallet=self.user_wallet.lower(), scope=self.models.KeyCreateScope.READ, label=f"status page {self.tag}",
            expires_in=3600,
        )
        answer = self.op("create_key").sync_detailed(client=self.admin, body=body)
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        issued = answer.parsed
        assert isinstance(issued, self.models.IssuedKey)
        assert issued.wallet == self.user_wallet and issued.role == self.models.IssuedKeyRole.USER
        assert issued.scope == self.models.IssuedKeyScope.READ and issued.label == body.label
        assert issued.expires_at is not None and issued.revoked_at is None and issued.key
        assert answer.headers["Location"] == f"/keys/{issued.id}"
        self.read_key = issued

    def list_keys_and_follow_next(self):
        listing = self.op("list_keys")
        answer = listing.sync_detailed(client=self.admin, wallet=self.user_wallet.lower(), limit=1)
        assert answer.status_code == HTTPStatus.OK, answer.content
        page = answer.parsed
        assert isinstance(page, self.models.KeyPage) and page.total == 2  # the user's key and the read key
        seen = [key.id for key in page.data]
        while True:
            assert self.read_key.key not in answer.content.decode() and self.keys["user"] not in answer.content.decode()
            if not page.next_:
                break
            answer = listing.sync_detailed(client=self.admin, cursor=page.next_)
            page = answer.parsed
            seen.extend(key.id for key in page.data)
        assert len(seen) == len(set(seen)) == page.total and self.read_key.id in seen

    def get_key(self):
        answer = self.op("get_key").sync_detailed(self.read_key.id, client=self.admin)
        assert answer.status_code == HTTPStatus.OK, answer.content
        assert isinstance(answer.parsed, self.models.Key)
        assert answer.parsed.id == self.read_key.id and answer.parsed.label == self.read_key.label
        assert self.read_key.key not in answer.content.decode()

    def read_key_is_read_only(self):
        reader = self.client(self.read_key.key)
        body = self.models.IdentityCreate(display_name=f"Read only {self.tag}")
        answer = self.op("create_identity").sync_detailed(client=reader, body=body)
        assert answer.status_code == HTTPStatus.FORBIDDEN
        self.problem(answer.parsed, 403)
        assert "read-only" in answer.parsed.detail
        assert self.me_of(self.read_key.key).key.scope == self.models.KeyScope.READ

    def rotate_key_with_grace(self):
        """An Admin rotates the read key with a grace: both keys work until it ends; the old one rotates no more."""
        rotate = self.op("rotate_key")
        answer = rotate.sync_detailed(self.read_key.id, client=self.admin, body=self.models.KeyRotate(grace_seconds=600))
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        new = answer.parsed
        assert isinstance(new, self.models.IssuedKey) and new.id != self.read_key.id and new.key != self.read_key.key
        assert (new.scope, new.label, new.expires_at) == (self.read_key.scope, self.read_key.label, self.read_key.expires_at)
        assert self.me_of(self.read_key.key).key.id == self.read_key.id
        assert self.me_of(new.key).key.id == new.id
        old = self.op("get_key").sync_detailed(self.read_key.id, client=self.admin).parsed
        assert old.revoked_at is not None and old.revoked_at > new.created_at
        again = rotate.sync_detailed(self.read_key.id, client=self.admin, body=self.models.KeyRotate())
        assert again.status_code == HTTPStatus.CONFLICT
        self.problem(again.parsed, 409)
        self.rotated_read_key = new

    def rotate_my_key(self):
        """A write key replaces itself (grace 0): the new one works, with the same label; the old one stops."""
        body = self.models.KeyCreate(wallet=self.user_wallet, label=f"ci {self.tag}")
        issued = self.op("create_key").sync_detailed(client=self.admin, body=body).parsed
        answer = self.op("rotate_my_key").sync_detailed(client=self.client(issued.key), body=self.models.KeyRotate())
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        new = answer.parsed
        assert isinstance(new, self.models.IssuedKey) and new.id != issued.id and new.label == issued.label
        assert new.scope == self.models.IssuedKeyScope.WRITE and new.created_by == self.user_wallet
        assert self.me_of(new.key).key.id == new.id
        self.refused(issued.key)
        self.own_key = new

    def revoke_key(self):
        answer = self.op("revoke_key").sync_detailed(self.rotated_read_key.id, client=self.admin)
        assert answer.status_code == HTTPStatus.NO_CONTENT, answer.content
        self.refused(self.rotated_read_key.key)
        revoked = self.op("get_key").sync_detailed(self.rotated_read_key.id, client=self.admin).parsed
        assert revoked.revoked_at is not None

    def revoke_my_key(self):
        answer = self.op("revoke_my_key").sync_detailed(client=self.client(self.own_key.key))
        assert answer.status_code == HTTPStatus.NO_CONTENT, answer.content
        self.refused(self.own_key.key)

    def get_user(self):
        """A user by wallet, in any case: identity_count counts its identities but removed ones."""
        answer = self.op("get_user").sync_detailed(self.user_wallet.lower(), client=self.user)
        assert answer.status_code == HTTPStatus.OK, answer.content
        found = answer.parsed
        assert isinstance(found, self.models.UserWithCount) and found.wallet == self.user_wallet
        listed = self.op("list_identities").sync_detailed(client=self.user, creator=self.user_wallet).parsed
        assert found.identity_count == listed.total == 2  # the two listed ones; the first is removed
        assert found.role == self.models.UserWithCountRole.USER and found.api_key == ""

    def key_problems(self):
        """The documented errors of the key and user routes parse into the Problem model."""
        models = self.models
        nobody = "0x" + secrets.token_hex(20)
        cases = {
            400: lambda: self.op("list_keys").sync_detailed(client=self.admin, cursor="not-a-cursor"),
            403: lambda: self.op("list_keys").sync_detailed(client=self.user),
            404: lambda: self.op("get_key").sync_detailed(uuid.uuid4(), client=self.admin),
            409: lambda: self.op("rotate_key").sync_detailed(
                self.rotated_read_key.id, client=self.admin, body=models.KeyRotate()
            ),
            422: lambda: self.op("create_key").sync_detailed(
                client=self.admin, body=models.KeyCreate(wallet=self.user_wallet, expires_in=10)
            ),
        }
        for status, call in cases.items():
            answer = call()
            assert answer.status_code == status, (status, answer.content)
            self.problem(answer.parsed, status)
        assert cases[422]().parsed.errors.additional_properties["expires_in"]
        unknown_user = self.op("get_user").sync_detailed(nobody, client=self.user)
        assert unknown_user.status_code == HTTPStatus.NOT_FOUND
        self.problem(unknown_user.parsed, 404)
        read_only = self.op("rotate_my_key").sync_detailed(client=self.client(self.read_key.key), body=models.KeyRotate())
        assert read_only.status_code == HTTPStatus.FORBIDDEN
        self.problem(read_only.parsed, 403)
        revoked = self.op("revoke_key").sync_detailed(uuid.uuid4(), client=self.admin)
        assert revoked.status_code == HTTPStatus.NOT_FOUND
        self.problem(revoked.parsed, 404)

    def webhooks(self):
        """An Admin registers a webhook (its secret in the 201 only), reads, pauses, lists its deliveries and
        removes it; a private address and a User key get problems."""
        models = self.models
        url = f"https://hooks.example.com/identity/{self.tag}"
        answer = self.op("create_webhook").sync_detailed(client=self.admin, body=models.WebhookCreate(url=url))
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        created = answer.parsed
        assert isinstance(created, models.WebhookCreated) and created.secret.startswith("whsec_")
        fetched = self.op("get_webhook").sync_detailed(created.id, client=self.admin)
        assert isinstance(fetched.parsed, models.Webhook) and fetched.parsed.url == url
        assert created.secret not in fetched.content.decode()
        listed = self.op("list_webhooks").sync_detailed(client=self.admin).parsed
        assert isinstance(listed, models.WebhookList) and created.id in [webhook.id for webhook in listed.data]
        paused = self.op("update_webhook").sync_detailed(
            created.id, client=self.admin, body=models.WebhookPatch(active=False)
        )
        assert paused.status_code == HTTPStatus.OK and paused.parsed.active is False
        deliveries = self.op("list_webhook_deliveries").sync_detailed(created.id, client=self.admin)
        assert isinstance(deliveries.parsed, models.DeliveryList), deliveries.content
        removed = self.op("delete_webhook").sync_detailed(created.id, client=self.admin)
        assert removed.status_code == HTTPStatus.NO_CONTENT
        gone = self.op("get_webhook").sync_detailed(created.id, client=self.admin)
        assert gone.status_code == HTTPStatus.NOT_FOUND
        self.problem(gone.parsed, 404)
        private = self.op("create_webhook").sync_detailed(
            client=self.admin, body=models.WebhookCreate(url="http://127.0.0.1/hook")
        )
        assert private.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, private.content
        self.problem(private.parsed, 422)
        as_user = self.op("list_webhooks").sync_detailed(client=self.user)
        assert as_user.status_code == HTTPStatus.FORBIDDEN
        self.problem(as_user.parsed, 403)

    def feed_with_docs(self):
        """include_docs=true: each entry carries its Identity (a mirror's way to read the feed), and Feed-Head
        names the feed's last seq."""
        answer = self.op("list_changes").sync_detailed(client=self.admin, include_docs=True, limit=5)
        assert answer.status_code == HTTPStatus.OK, answer.content
        page = answer.parsed
        assert isinstance(page, self.models.ChangeFeed) and page.data
        assert all(isinstance(entry.doc, self.models.Identity) and entry.doc.identity_id == entry.identity_id
                   for entry in page.data)
        assert int(answer.headers["Feed-Head"]) >= page.next_after

    def mirrors(self):
        """An Admin registers an upstream (its key in no answer), reads, lists, pauses and removes it; the same
        upstream twice, a URL that is not one, and a User key get problems."""
        models = self.models
        url, key = f"https://upstream-{self.tag}.example.org", f"idsk_{self.tag}_the_upstreams_key"
        answer = self.op("create_mirror").sync_detailed(client=self.admin, body=models.MirrorCreate(url=url, key=key))
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        created = answer.parsed
        assert isinstance(created, models.Mirror) and created.url == url and key not in answer.content.decode()
        fetched = self.op("get_mirror").sync_detailed(created.id, client=self.admin).parsed
        assert isinstance(fetched, models.Mirror) and fetched.position == 0 and fetched.lag_entries == 0
        listed = self.op("list_mirrors").sync_detailed(client=self.admin).parsed
        assert isinstance(listed, models.MirrorList) and created.id in [mirror.id for mirror in listed.data]
        paused = self.op("update_mirror").sync_detailed(created.id, client=self.admin, body=models.MirrorPatch(active=False))
        assert paused.status_code == HTTPStatus.OK and paused.parsed.active is False
        twice = self.op("create_mirror").sync_detailed(client=self.admin, body=models.MirrorCreate(url=url, key=key))
        assert twice.status_code == HTTPStatus.CONFLICT, twice.content
        self.problem(twice.parsed, 409)
        invalid = self.op("create_mirror").sync_detailed(client=self.admin, body=models.MirrorCreate(url="ftp://x", key=key))
        assert invalid.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, invalid.content
        self.problem(invalid.parsed, 422)
        removed = self.op("delete_mirror").sync_detailed(created.id, client=self.admin)
        assert removed.status_code == HTTPStatus.NO_CONTENT
        gone = self.op("get_mirror").sync_detailed(created.id, client=self.admin)
        assert gone.status_code == HTTPStatus.NOT_FOUND
        self.problem(gone.parsed, 404)
        as_user = self.op("list_mirrors").sync_detailed(client=self.user)
        assert as_user.status_code == HTTPStatus.FORBIDDEN
        self.problem(as_user.parsed, 403)

    # -- helpers ---------------------------------------------------------------------------------

    def me_of(self, key):
        """GET /me with `key`, which must work."""
        answer = self.op("get_me").sync_detailed(client=self.client(key))
        assert answer.status_code == HTTPStatus.OK, answer.content
        return answer.parsed

    def refused(self, key):
        """`key` gets 401 problems, at the latest once the server's key cache has let go of it."""
        deadline = time.monotonic() + REFUSAL_DEADLINE_SECONDS
        while True:
            answer = self.op("get_me").sync_detailed(client=self.client(key))
            if answer.status_code == HTTPStatus.UNAUTHORIZED:
                self.problem(answer.parsed, 401)
                return
            assert answer.status_code == HTTPStatus.OK, answer.content
            assert time.monotonic() < deadline, "a revoked key still works"
            time.sleep(0.1)

    def problem(self, parsed, status):
        assert isinstance(parsed, self.models.Problem), parsed
        assert parsed.status == status and parsed.title and parsed.detail

    def problem_of(self, answer):
        return answer.parsed
