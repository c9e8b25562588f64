"""The scenario's steps of wallet proofs, through the client openapi-python-client generates (mixed into
tests.clients.scenario.Scenario): a wallet signs in for a key of its own, then creates an identity signed by
it, which anyone verifies from the fetched Identity. The wallet is eth-account's; ethers signs the same
steps in the TypeScript scenario."""

from http import HTTPStatus

from eth_account import Account
from eth_account.messages import encode_defunct, encode_typed_data

from tests.wallets import siwe_message

WALLET_STEPS = ("sign_in_with_ethereum", "signed_create")


class WalletSteps:
    def sign_in_with_ethereum(self):
        anonymous = self.generated.Client(base_url=self.base_url, raise_on_unexpected_status=True)
        offered = self.op("get_signin_nonce").sync_detailed(client=anonymous)
        assert offered.status_code == HTTPStatus.OK and isinstance(offered.parsed, self.models.SigninNonce)
        self.wallet = Account.create()
        nonce = offered.parsed
        message = siwe_message(nonce.domain, self.wallet.address, nonce.nonce, uri=nonce.uri)
        signature = self.wallet.sign_message(encode_defunct(text=message)).signature.to_0x_hex()
        body = self.models.Signin(message=message, signature=signature, label=f"scenario {self.tag}")
        answer = self.op("sign_in_with_ethereum").sync_detailed(client=anonymous, body=body)
        assert answer.status_code == HTTPStatus.CREATED, answer.content
        signed_in = answer.parsed
        assert isinstance(signed_in, self.models.SignedIn) and isinstance(signed_in.user, self.models.User)
        assert signed_in.user.wallet == signed_in.wallet == self.wallet.address
        assert signed_in.created_by == "siwe" and signed_in.label == f"scenario {self.tag}"
        self.wallet_key = signed_in.key
        assert self.me_of(self.wallet_key).key.id == signed_in.id
        replayed = self.op("sign_in_with_ethereum").sync_detailed(client=anonymous, body=body)
        assert replayed.status_code == HTTPStatus.UNAUTHORIZED
        self.problem(replayed.parsed, 401)

    def signed_create(self):
        client = self.client(self.wallet_key)
        body = self.models.IdentityCreate(display_name=f"Signed {self.tag}")
        preview = self.op("preview_identity").sync_detailed(client=client, body=body)
        assert preview.status_code == HTTPStatus.OK and isinstance(preview.parsed, self.models.IdentityPreview)
        assert preview.parsed.exists is False
        typed_data = preview.parsed.typed_data.to_dict()
        signature = self.wallet.sign_message(encode_typed_data(full_message=typed_data)).signature.to_0x_hex()
        body.signature = signature
        created = self.op("create_identity").sync_detailed(client=client, body=body)
        assert created.status_code == HTTPStatus.CREATED, created.content
        fetched = self.op("get_identity").sync_detailed(created.parsed.identity_id, client=self.user).parsed
        assert fetched.creator_signature == signature and fetched.creator.wallet == self.wallet.address
        assert fetched.identity_id == preview.parsed.identity_id
        recovered = Account.recover_message(encode_typed_data(full_message=typed_data), signature=fetched.creator_signature)
        assert recovered == self.wallet.address
        forged = Account.create().sign_message(encode_typed_data(full_message=typed_data)).signature.to_0x_hex()
        other = self.models.IdentityCreate(display_name=f"Signed {self.tag}", signature=forged)
        refused = self.op("preview_identity").sync_detailed(client=client, body=other)
        assert refused.status_code == HTTPStatus.UNPROCESSABLE_ENTITY
        self.problem(refused.parsed, 422)
        assert refused.parsed.errors.additional_properties["signature"]
