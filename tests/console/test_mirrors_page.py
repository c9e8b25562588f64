"""The console's Mirrors page, through the test client: the mirrors with their lag and last error, and adding,
pausing, resuming, re-keying and removing one, as /mirrors does it (the same functions of identity.data.mirrors
behind both), with the upstream's key never shown back."""

import logging
import re
from datetime import timedelta
from html import unescape

import pytest
from sqlalchemy import select, update

from identity.storage.database import db
from identity.storage.models import Mirror, utcnow
from tests.common.console import form_value

UPSTREAM_KEY = "idsk_upstream-key-never-shown-anywhere"
NEW_KEY = "idsk_the-replacement-key-never-shown-either"
MARKUP = "<img src=x onerror=alert(1)>"


@pytest.fixture
def app_config():
    return {"IDENTITY_MIRRORS_FOLLOW": False}  # registered, never followed: nothing listens at these upstreams


def api_mirrors(client, admin_key):
    answer = client.get("/mirrors", headers={"x-api-key": admin_key})
    assert answer.status_code == 200, answer.text
    return answer.get_json()["data"]


def stored_key(app, mirror_id):
    with app.app_context():
        key = db.session.execute(select(Mirror.api_key).where(Mirror.id == mirror_id)).scalar_one()
        db.session.commit()
    return key


def add(console, url="http://127.0.0.1:9", key=UPSTREAM_KEY, name="replica"):
    return console.post("/admin/mirrors", {"url": url, "key": key, "name": name}, token=console.token("/admin/mirrors"))


def test_a_mirror_is_added_and_its_key_is_kept_for_the_upstream_but_never_shown(console, client, admin_key, app,
                                                                                  caplog):
    assert "No mirror is registered" in console.text("/admin/mirrors")
    with caplog.at_level(logging.DEBUG):
        answer = add(console)
    assert answer.status_code == 303
    [mirror] = api_mirrors(client, admin_key)
    assert (mirror["name"], mirror["url"], mirror["active"], mirror["position"]) == ("replica", "http://127.0.0.1:9",
                                                                                     True, 0)
    assert answer.headers["Location"] == f"/admin/mirrors/{mirror['id']}?done=added"
    assert stored_key(app, mirror["id"]) == UPSTREAM_KEY
    for path in (answer.headers["Location"], "/admin/mirrors", "/admin/status"):
        assert UPSTREAM_KEY not in console.text(path), path
    assert "The mirror is added" in console.text(answer.headers["Location"])
    assert UPSTREAM_KEY not in answer.headers["Location"] and UPSTREAM_KEY not in caplog.text
    assert "mirror registered" in caplog.text  # the log saw the registration, without its key


def test_a_refused_form_says_what_to_correct_and_does_not_write_the_key_back(console, client, admin_key):
    answer = add(console, url="ftp://upstream.example.org", name="  ")
    page = unescape(answer.get_data(as_text=True))
    assert answer.status_code == 422 and "The mirror was not added" in page
    assert re.search(r'id="url-error">[^<]+', page) and 'value="ftp://upstream.example.org"' in page
    assert UPSTREAM_KEY not in page
    missing = add(console, key="")
    assert missing.status_code == 422 and 'id="key-error"' in missing.get_data(as_text=True)
    broken = add(console, key="idsk_with a space")
    assert broken.status_code == 422 and "idsk_with a space" not in broken.get_data(as_text=True)
    assert api_mirrors(client, admin_key) == []


def test_a_second_mirror_of_the_same_name_or_upstream_is_refused_on_the_form(console, client, admin_key):
    assert add(console).status_code == 303
    for taken in (add(console, url="https://other.example.org"), add(console, name="another")):
        page = unescape(taken.get_data(as_text=True))
        assert taken.status_code == 409 and "is registered already" in page and UPSTREAM_KEY not in page
    assert len(api_mirrors(client, admin_key)) == 1


def test_the_list_shows_each_mirrors_lag_counts_and_last_error_as_text(console, client, admin_key, app):
    assert add(console, name=MARKUP).status_code == 303
    assert add(console, url="https://identity.example.org/registry", name="far").status_code == 303
    with app.app_context():
        db.session.execute(update(Mirror).where(Mirror.name == "far").values(
            upstream_head=1_250, position=250, position_at=utcnow() - timedelta(seconds=30), applied=240,
            already_present=8, rejected=2, last_error="the upstream answered 503 <b>", last_error_at=utcnow(),
            active=False))
        db.session.commit()

    page = console.text("/admin/mirrors")

    assert MARKUP not in page and "&lt;img src=x onerror=alert(1)&gt;" in page and "<b>" not in page
    rows = [" ".join(unescape(re.sub(r"<[^>]+>", " ", row)).split()) for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)[1:]]
    assert [row.split(" ", 1)[0] for row in rows] == ["<img", "far"]
    first, far = rows
    assert "http://127.0.0.1:9" in first and "active" in first and "none behind" in first and "none" in first
    assert "paused" in far and "at entry 250 of the upstream's 1,250" in far
    assert re.search(r"1,000 entries behind \(3\d\.\d s\)", far)
    assert "240 applied, 8 already here, 2 rejected" in far and "the upstream answered 503 <b>" in far
    far_id = next(mirror["id"] for mirror in api_mirrors(client, admin_key) if mirror["name"] == "far")
    shown = unescape(re.sub(r"<[^>]+>", " ", console.text(f"/admin/mirrors/{far_id}")))
    assert "Last error" in shown and "the upstream answered 503 <b>" in shown and "Resume" in shown
    assert UPSTREAM_KEY not in page


def test_a_mirror_is_paused_resumed_given_a_new_key_and_removed(console, client, admin_key, app):
    add(console)
    mirror_id = api_mirrors(client, admin_key)[0]["id"]
    path = f"/admin/mirrors/{mirror_id}"
    shown = console.text(path)

    paused = console.post(path + "/pause", token=form_value(shown, "csrf_token"))
    assert paused.status_code == 303 and "The mirror is paused" in console.text(paused.headers["Location"])
    assert api_mirrors(client, admin_key)[0]["active"] is False
    resumed = console.post(path + "/resume")
    assert "The mirror is resumed" in console.text(resumed.headers["Location"])
    assert api_mirrors(client, admin_key)[0]["active"] is True

    refused = console.post(path + "/key", {"key": ""})
    assert refused.status_code == 422 and 'id="key-error"' in refused.get_data(as_text=True)
    assert stored_key(app, mirror_id) == UPSTREAM_KEY
    replaced = console.post(path + "/key", {"key": NEW_KEY})
    assert replaced.status_code == 303 and NEW_KEY not in replaced.headers["Location"]
    page = unescape(console.text(replaced.headers["Location"]))
    assert "The mirror's key is replaced" in page and NEW_KEY not in page and UPSTREAM_KEY not in page
    assert stored_key(app, mirror_id) == NEW_KEY

    assert "Remove this mirror?" in console.text(path + "/remove")
    assert api_mirrors(client, admin_key) != []  # the confirmation page changes nothing
    removed = console.post(path + "/remove")
    assert removed.status_code == 303 and "The mirror is removed" in console.text(removed.headers["Location"])
    assert api_mirrors(client, admin_key) == []
    assert console.get(path).status_code == 404


@pytest.mark.parametrize("path", ["/admin/mirrors/5f0c1b52-0000-4000-8000-000000000000",
                                  "/admin/mirrors/5f0c1b52-0000-4000-8000-000000000000/remove",
                                  "/admin/mirrors/not-a-uuid"])
def test_an_unknown_mirror_is_a_404_page(console, path):
    answer = console.get(path)
    assert answer.status_code == 404 and answer.mimetype == "text/html"


def test_changing_an_unknown_mirror_is_a_404_page_and_changes_nothing(console):
    token = console.token("/admin/mirrors")
    for action in ("pause", "resume", "remove"):
        answer = console.post(f"/admin/mirrors/5f0c1b52-0000-4000-8000-000000000000/{action}", token=token)
        assert answer.status_code == 404 and answer.mimetype == "text/html", action
    answer = console.post("/admin/mirrors/5f0c1b52-0000-4000-8000-000000000000/key", {"key": NEW_KEY}, token=token)
    assert answer.status_code == 404 and NEW_KEY not in answer.get_data(as_text=True)


def test_a_form_from_another_origin_or_without_the_token_adds_nothing(console, client, admin_key):
    token = console.token("/admin/mirrors")
    foreign = console.post("/admin/mirrors", {"url": "http://127.0.0.1:9", "key": UPSTREAM_KEY},
                           origin="https://evil.example", token=token)
    assert foreign.status_code == 403
    forged = console.post("/admin/mirrors", {"url": "http://127.0.0.1:9", "key": UPSTREAM_KEY}, token="forged")
    assert forged.status_code == 403
    assert api_mirrors(client, admin_key) == []


def test_a_read_only_admin_sees_the_mirrors_with_no_control_that_writes(console, console_for, read_only_admin_key,
                                                                         client, admin_key):
    add(console)
    mirror_id = api_mirrors(client, admin_key)[0]["id"]
    reader = console_for(read_only_admin_key)
    for path in ("/admin/mirrors", f"/admin/mirrors/{mirror_id}"):
        page = reader.text(path)
        assert "replica" in page and "read-only" in page
        assert page.count('method="post"') == 1 and "/admin/sign-out" in page, path  # Sign out only
        assert "Remove…" not in page and 'name="key"' not in page
    token = reader.token("/admin/mirrors")
    for path, data in ((f"/admin/mirrors/{mirror_id}/pause", {}), (f"/admin/mirrors/{mirror_id}/key", {"key": NEW_KEY}),
                       (f"/admin/mirrors/{mirror_id}/remove", {}), ("/admin/mirrors", {"url": "https://x.example"})):
        answer = reader.post(path, data, token=token)
        assert answer.status_code == 403 and "read-only" in answer.get_data(as_text=True), path
    assert api_mirrors(client, admin_key)[0]["active"] is True
