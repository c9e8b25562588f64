"""The fields of the contract's objects, as the interface names them."""




CONTRACT_KEYS = {
    "id", "identity_id", "identity_hash", "vault_id", "display_name", "description", "image",
    "corpora_id", "semantic", "external_reference", "creator", "created_at", "updated_at",
    "num_positions", "assets_sum", "conviction_sum", "conviction_price", "status", "isUser",
    "user_conviction", "user_conviction_value", "creator_signature", "creator_signature_chain_id",
}


USER_KEYS = {"id", "created_at", "updated_at", "last_login", "api_key", "wallet", "role"}
