"""Searching the listing: displayName (case-insensitive substring) and q (full text, every word a prefix)."""

import random
import unicodedata
from urllib.parse import urlencode

import pytest

from identity import seed
from tests.common.apps import USER_WALLET


@pytest.fixture
def search(client, user_key):
    """search(**params) -> the page body of GET /identities/search."""

    def get(**params):
        response = client.get(f"/identities/search?{urlencode(params)}", headers={"x-api-key": user_key})
        assert response.status_code == 200, response.get_json()
        return response.get_json()

    return get


@pytest.fixture
def make(app):
    def create(display_name, description=None):
        return seed.create_identity(app, display_name, description=description, creator=USER_WALLET)["identity_id"]

    return create


def names(body):
    return sorted(item["display_name"] for item in body["data"])


def test_display_name_matches_a_substring_in_any_case(search, make):
    make("Vitalik Buterin")
    make("Gavin Wood")
    make("Buterin's cat")
    body = search(displayName="BUTER")
    assert (names(body), body["total"]) == (["Buterin's cat", "Vitalik Buterin"], 2)
    assert names(search(displayName="in W")) == ["Gavin Wood"]
    assert search(displayName="Butterin")["total"] == 0


def test_display_name_shorter_than_a_trigram_still_matches(search, make):
    make("Ax")
    make("Box")
    make("Cat")
    assert names(search(displayName="x")) == ["Ax", "Box"]
    assert names(search(displayName="OX")) == ["Box"]


def test_display_name_wildcards_and_quotes_are_plain_characters(search, make):
    make('50% "off" deal_1')
    make("500 off deals")
    assert names(search(displayName="0%")) == ['50% "off" deal_1']
    assert names(search(displayName='"off"')) == ['50% "off" deal_1']
    assert names(search(displayName="l_1")) == ['50% "off" deal_1']


def test_display_name_does_not_look_at_the_description(search, make):
    make("Plain", description="Buterin")
    assert search(displayName="Buterin")["total"] == 0


def test_display_name_is_compared_after_nfc(search, make):
    make("Café Noir")  # stored NFC
    decomposed = "Cafe\u0301"
    assert names(search(displayName=decomposed)) == ["Café Noir"]


@pytest.mark.sqlite_only
def test_display_name_ignores_the_case_of_accented_letters_too(search, make):
    # PostgreSQL folds case as its database's LC_CTYPE does (the suite's server runs with C).
    make("École Polytechnique")
    assert names(search(displayName="éCOLE")) == ["École Polytechnique"]


def test_q_matches_every_word_as_a_prefix_case_and_accents_ignored(search, make):
    make("Zoë Ärger", description="Painter from Zürich")
    make("Zoe Smith", description="Sculptor")
    make("Arthur", description="Zoologist")
    assert names(search(q="zoe")) == ["Zoe Smith", "Zoë Ärger"]
    assert names(search(q="ZO ARG")) == ["Zoë Ärger"]
    assert names(search(q="zur paint")) == ["Zoë Ärger"]
    assert names(search(q="zo")) == ["Arthur", "Zoe Smith", "Zoë Ärger"]
    assert search(q="zoe painter sculptor")["total"] == 0


def test_q_matches_starts_of_words_not_their_middles(search, make):
    make("Vitalik Buterin")
    assert search(q="vital")["total"] == 1
    assert search(q="italik")["total"] == 0


def test_q_puts_display_name_matches_first_without_sort_by(search, make):
    in_name = make("Ethereum Foundation")
    make("Alice", description="Works at the Ethereum Foundation")  # newer, but matched by description
    body = search(q="ethereum found")
    assert [item["identity_id"] for item in body["data"]][0] == in_name
    assert body["total"] == 2


def test_q_with_sort_by_follows_the_sort(search, make):
    make("Ethereum Foundation")
    newer = make("Alice", description="Ethereum person")
    assert search(q="ethereum", sortBy="created_at")["data"][0]["identity_id"] == newer


def test_q_walks_its_pages_by_cursor_best_match_first(search, make):
    in_name = [make(f"Solidity dev {n}") for n in range(3)]
    in_description = [make(f"Person {n}", description="solidity") for n in range(3)]
    pages = [search(q="solidity", limit=2)]
    while pages[-1]["next"]:
        pages.append(search(cursor=pages[-1]["next"]))
    visited = [item["identity_id"] for page in pages for item in page["data"]]
    assert visited == list(reversed(in_name)) + list(reversed(in_description))


def test_q_and_display_name_and_creator_combine(search, make, app):
    make("Ada Lovelace", description="mathematician")
    make("Ada Wong", description="agent")
    seed.create_identity(app, "Ada Other", description="mathematician")  # another creator
    body = search(q="mathem", displayName="love", creator=USER_WALLET)
    assert (names(body), body["total"]) == (["Ada Lovelace"], 1)
    assert search(q="ada", creator=USER_WALLET)["total"] == 2
    assert search(q="ada")["total"] == 3


def test_q_without_letters_or_digits_filters_nothing(search, make):
    make("One")
    make("Two")
    assert search(q="!!! --")["total"] == 2


def test_q_with_search_syntax_is_taken_as_words(search, make):
    make("Rock and roll", description="NEAR the AND OR NOT")
    for q in ['"rock', "rock*", "rock AND", "NOT rock", "rock:roll", "(rock)", "r'o", "rock & !roll", "a\\b"]:
        assert search(q=q)["total"] in (0, 1), q
    assert search(q="rock OR")["total"] == 1


def test_search_indexes_see_a_create_as_soon_as_it_is_answered(client, create, user_key):
    assert create({"display_name": "Freshly Made", "description": "Brand new"}).status_code == 201
    for query in ("q=fresh+brand", "displayName=shly+m"):
        body = client.get(f"/identities?{query}", headers={"x-api-key": user_key}).get_json()
        assert [item["display_name"] for item in body["data"]] == ["Freshly Made"], query


@pytest.mark.parametrize("name", ["q", "displayName"])
@pytest.mark.parametrize("value", ["", "a" * 101, "bad\x00null", "tab\there", "\x7f"])
def test_search_text_out_of_range_is_400_naming_it(client, user_key, name, value):
    response = client.get(f"/identities?{urlencode({name: value})}", headers={"x-api-key": user_key})
    assert response.status_code == 400
    assert list(response.get_json()["errors"]) == [name]


def test_a_search_of_100_characters_is_allowed(search):
    assert search(q="word " * 19 + "word")["total"] == 0
    assert search(displayName="x" * 100)["total"] == 0


def test_the_longest_cursor_fits_its_documented_length(search, make):
    # 100 astral letters that do not repeat (4 bytes each in UTF-8, 12 percent-encoded): what compresses least.
    letters = [chr(c) for c in range(0x1D400, 0x1D6A4) if unicodedata.category(chr(c)).startswith("L")]
    longest = "".join(random.Random(14).choices(letters, k=100))
    make(longest + " one" + "z" * 152)  # 256 characters: the longest display_name
    make(longest + " two" + "z" * 152)
    first = search(q=longest, displayName=longest, limit=1, creator=USER_WALLET, sortBy="display_name")
    assert first["total"] == 2
    assert len(first["next"]) <= 1400
    assert search(cursor=first["next"])["data"][0]["display_name"].startswith(longest + " one")
