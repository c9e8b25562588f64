"""The domain: identities, keys, curation, browse, history, content addressing; no request, no HTTP words."""
