"""What every listing that pages shares (GET /identities, GET /keys, GET /audit): its bounds, its `limit` and
`cursor` parameters, and the `next` of the page it answers."""

from marshmallow import fields, validate

MAX_PAGE_ITEMS = 10_000  # page × limit; a cursor goes deeper
MAX_CURSOR_LENGTH = 1400
CURSOR_PATTERN = r"^[A-Za-z0-9_.-]+$"


def limit_field(items="Items"):
    """The `limit` parameter: how many `items` a page holds, 1 to 100."""
    return fields.Integer(
        validate=validate.Range(1, 100),
        metadata={"description": f"{items} per page, 1 to 100 (default 20; with a cursor, the cursor's).", "example": 20},
    )


def cursor_field(description="The `next` of a previous page: continues that listing."):
    """The `cursor` parameter: a page's `next`, refused unless it could be one this service issued."""
    return fields.String(
        validate=[
            validate.Length(1, MAX_CURSOR_LENGTH),
            validate.Regexp(CURSOR_PATTERN, error="Not a cursor this service issued; use the next of a page."),
        ],
        metadata={"pattern": CURSOR_PATTERN, "description": description},
    )


def next_field():
    """A page's `next`: the cursor of the page after it."""
    return fields.String(
        required=True, allow_none=True, metadata={"description": "Cursor of the next page; null on the last page."}
    )
