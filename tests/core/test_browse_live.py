"""The listing on real gunicorn: a cursor walk while other clients create identities."""

import threading

import requests

from identity.seed import new_wallet


def test_cursor_walk_visits_every_identity_that_existed_once_while_others_create(live_server):
    session = requests.Session()
    session.headers["x-api-key"] = live_server.api_key  # an Admin key: it may create for any wallet
    creator = new_wallet()

    def create(name):
        response = session.post(f"{live_server.url}/identity", json={"display_name": name, "creator": creator}, timeout=10)
        assert response.status_code == 201, response.text
        return response.json()["identity_id"]

    existing = {create(f"Walked {n}") for n in range(40)}
    made_during = []
    walking = threading.Event()
    stop = threading.Event()

    def keep_creating():
        writer = requests.Session()
        writer.headers["x-api-key"] = live_server.api_key
        number = 0
        walking.wait(10)
        while not stop.is_set() and number < 200:
            body = {"display_name": f"Created meanwhile {number}", "creator": creator}
            response = writer.post(f"{live_server.url}/identity", json=body, timeout=10)
            if response.status_code == 201:
                made_during.append(response.json()["identity_id"])
            number += 1

    writer = threading.Thread(target=keep_creating)
    writer.start()
    try:
        visited, pages = [], 0
        url = f"{live_server.url}/identities?creator={creator.lower()}&limit=3"
        while url:
            response = session.get(url, timeout=10)
            assert response.status_code == 200, response.text
            page = response.json()
            visited.extend(item["identity_id"] for item in page["data"])
            pages += 1
            walking.set()
            url = page["next"] and f"{live_server.url}/identities?cursor={page['next']}"
    finally:
        stop.set()
        writer.join(30)

    assert made_during, "no identity was created during the walk"
    assert len(visited) == len(set(visited)), "an identity was visited twice"
    assert existing <= set(visited), "an identity that existed when the walk began was skipped"
    assert pages >= len(existing) // 3
    # total counts what exists now: at least what was made before and during the walk.
    final = session.get(f"{live_server.url}/identities?creator={creator}&limit=1", timeout=10).json()
    assert final["total"] == len(existing) + len(made_during)
