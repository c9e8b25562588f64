"""A short scenario through the Python client that openapi-generator (its `python` generator) makes from
the live /openapi.json.

Only generated code talks to the service: the `IdentitiesApi` class (one method per operationId, in
snake case), the pydantic models, and the `Configuration` of the document's apiKey scheme (ApiKeyAuth).
A documented error is raised as the generated exception of its status, whose `data` is the parsed body.
Each step is a method of `GeneratorScenario`, run in the order of STEPS.
"""

import importlib
import uuid
from http import HTTPStatus

from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data

from tests.wallets import siwe_message

PACKAGE = "identity_service_generated"
STEPS = ("create", "fetch", "conflict", "list_and_follow_next", "problems", "sign_in_and_create_signed", "mirrors")


class GeneratorScenario:
    def __init__(self, base_url, key, wallet, admin_key):
        """`key`: a User key of `wallet`; `admin_key`: an Admin key, for the routes only Admins may call."""
        self.generated = importlib.import_module(PACKAGE)
        self.exceptions = importlib.import_module(f"{PACKAGE}.exceptions")
        self.wallet = wallet
        self.base_url = base_url
        self.client = self.generated.ApiClient(
            self.generated.Configuration(host=base_url, api_key={"ApiKeyAuth": key})
        )
        self.api = self.generated.IdentitiesApi(self.client)
        self.admin = self.generated.IdentitiesApi(self.generated.ApiClient(
            self.generated.Configuration(host=base_url, api_key={"ApiKeyAuth": admin_key})
        ))
        self.tag = uuid.uuid4().hex[:12]  # so that the scenario's content is new on every run
        self.done = []

    def run(self):
        with self.client:
            for step in STEPS:
                try:
                    getattr(self, step)()
                except AssertionError as error:
                    raise AssertionError(f"step {step} failed: {error}") from error
                self.done.append(step)
        return self.done

    # -- steps -----------------------------------------------------------------------------------

    def create(self):
        self.body = self.generated.IdentityCreate(
            display_name=f"Grace Hopper {self.tag}", description="Compiler pioneer",
            external_reference="https://example.org/grace",
        )
        answer = self.api.create_identity_with_http_info(identity_create=self.body)
        assert answer.status_code == HTTPStatus.CREATED
        self.identity = answer.data
        assert isinstance(self.identity, self.generated.Identity)
        assert self.identity.status == "complete" and self.identity.creator.wallet == self.wallet
        assert answer.headers["Location"] == f"/identity/{self.identity.identity_id}"

    def fetch(self):
        fetched = self.api.get_identity(self.identity.identity_id)
        assert isinstance(fetched, self.generated.Identity)
        assert fetched.identity_id == self.identity.identity_id and fetched.display_name == self.body.display_name

    def conflict(self):
        try:
            self.api.create_identity(identity_create=self.body)
        except self.exceptions.ConflictException as error:
            self.problem(error.data, 409)
            assert error.data.identity_id == self.identity.identity_id
        else:
            raise AssertionError("creating the same content twice was not a 409")

    def list_and_follow_next(self):
        for n in range(2):
            self.api.create_identity(identity_create=self.generated.IdentityCreate(display_name=f"Listed {n} {self.tag}"))
        page = self.api.list_identities(creator=self.wallet, limit=1)
        assert isinstance(page, self.generated.IdentityPage) and page.total == 3
        seen = [identity.identity_id for identity in page.data]
        while page.next:
            page = self.api.list_identities(cursor=page.next)
            seen.extend(identity.identity_id for identity in page.data)
        assert len(seen) == len(set(seen)) == page.total and self.identity.identity_id in seen

    def problems(self):
        """A 404 and a 422 are raised as their exceptions, their bodies parsed into Problem."""
        unknown = "did:identity:ipfs:bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa"
        try:
            self.api.get_identity(unknown)
        except self.exceptions.NotFoundException as error:
            self.problem(error.data, 404)
        else:
            raise AssertionError("an unknown identity was not a 404")
        # A mixed-case address whose EIP-55 checksum fails: the pattern lets it through, the service not.
        bad_checksum = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD"
        invalid = self.generated.IdentityCreate(display_name=f"Bad creator {self.tag}", creator=bad_checksum)
        try:
            self.api.create_identity(identity_create=invalid)
        except self.exceptions.UnprocessableEntityException as error:
            self.problem(error.data, 422)
            assert "creator" in error.data.errors
        else:
            raise AssertionError("a creator with a wrong checksum was not a 422")

    def sign_in_and_create_signed(self):
        """A wallet signs in (no key sent: the operation's security is empty), then signs its create."""
        offered = self.api.get_signin_nonce()
        assert isinstance(offered, self.generated.SigninNonce)
        wallet = Account.create()
        message = siwe_message(offered.domain, wallet.address, offered.nonce, uri=offered.uri)
        signature = wallet.sign_message(encode_defunct(text=message)).signature.to_0x_hex()
        signed_in = self.api.sign_in_with_ethereum(signin=self.generated.Signin(message=message, signature=signature))
        assert isinstance(signed_in, self.generated.SignedIn) and signed_in.user.wallet == wallet.address
        configuration = self.generated.Configuration(host=self.base_url, api_key={"ApiKeyAuth": signed_in.key})
        with self.generated.ApiClient(configuration) as client:
            own = self.generated.IdentitiesApi(client)
            body = self.generated.IdentityCreate(display_name=f"Signed {self.tag}")
            typed_data = own.preview_identity(identity_create=body).typed_data.to_dict()
            body.signature = wallet.sign_message(encode_typed_data(full_message=typed_data)).signature.to_0x_hex()
            created = own.create_identity(identity_create=body)
        assert created.creator_signature == body.signature and created.creator.wallet == wallet.address
        try:
            self.api.sign_in_with_ethereum(signin=self.generated.Signin(message=message, signature=signature))
        except self.exceptions.UnauthorizedException as error:
            self.problem(error.data, 401)
        else:
            raise AssertionError("a nonce used twice was not a 401")

    def mirrors(self):
        """An Admin registers an upstream, reads it (never its key) and removes it; then it is a 404."""
        key = f"idsk_{self.tag}_the_upstreams_key"
        created = self.admin.create_mirror(self.generated.MirrorCreate(url=f"https://upstream-{self.tag}.example.org", key=key))
        assert isinstance(created, self.generated.Mirror) and created.active and created.lag_entries == 0
        fetched = self.admin.get_mirror(created.id)
        assert fetched.id == created.id and key not in fetched.to_json()
        self.admin.delete_mirror(created.id)
        try:
            self.admin.get_mirror(created.id)
        except self.exceptions.NotFoundException as error:
            self.problem(error.data, 404)
        else:
            raise AssertionError("a removed mirror was not a 404")

    def problem(self, parsed, status):
        assert isinstance(parsed, self.generated.Problem), parsed
        assert parsed.status == status and parsed.title and parsed.detail
