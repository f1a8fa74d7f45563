"""The gallery's placement surfaces: the Owners page (shares, usage, hostile names inert),
the submit form's requirements and owner (NOVA_WEB_OWNER: the web token has no user), and
a job's warning while no live worker meets its requirements."""

from __future__ import annotations

import json

import pytest
from novatests.web import WEB_TOKEN, XSS, XSS_ESCAPED, csrf_of, enqueue, unsafe_markup

from nova_queue import Settings


def post_job(client, **fields):
    data = {"app": "synthetic", "prompts": "a\nb", "csrf_token": csrf_of(client),
            "token": WEB_TOKEN, **fields}
    return client.post("/", data=data)


def job_count(nova) -> int:
    return len(nova.redis.keys(f"{nova.prefix}job:*"))


def test_the_owners_page_lists_shares_usage_and_queues(client, nova):
    enqueue(nova, ["a"], owner="alice")
    enqueue(nova, ["a"], owner="bob")
    nova.redis.hset(nova.keys.shares(), "alice", "3")
    html = client.get("/owners").get_data(as_text=True)
    assert html.index(">alice<") < html.index(">bob<")  # no usage: by name
    assert "75 %" in html and "25 %" in html and "halving every\n    1 h 00 min" in html
    assert 'href="/owners"' in client.get("/").get_data(as_text=True)  # in the navigation


def test_the_owners_page_shows_a_hostile_owner_name_as_text(client, nova):
    # no enqueue takes such a name; written by hand (a share) it must still render inert
    nova.redis.hset(nova.keys.shares(), XSS, "2")
    resp = client.get("/owners")
    html = resp.get_data(as_text=True)
    assert resp.status_code == 200 and XSS_ESCAPED in html
    assert unsafe_markup(html) == [] and XSS not in html


def test_the_form_enqueues_requirements_and_the_web_owner(client, nova):
    resp = post_job(client, requires="backend=cuda,rocm\n# a comment\n\nmemory_gb>=12\n")
    assert resp.status_code == 303, resp.get_data(as_text=True)[:500]
    job = resp.headers["Location"].rsplit("/", 1)[-1]
    st = nova.job(job, with_tasks=False)
    assert [tuple(r) for r in st.requires] == [("backend", "in", ("cuda", "rocm")),
                                               ("memory_gb", ">=", ("12",))]
    assert st.owner == "web"  # Settings.web_owner (NOVA_WEB_OWNER)


def test_the_form_owner_is_nova_web_owner(redis_url, namespace, store_root):
    from nova_queue.web import create_app

    settings = Settings(redis_url=redis_url, namespace=namespace, store_url=store_root.as_uri(),
                        web_token=WEB_TOKEN, web_owner="lab-gallery")
    app = create_app({"TESTING": True, "SECRET_KEY": "s"}, settings=settings)
    try:
        resp = post_job(app.test_client())
        job = resp.headers["Location"].rsplit("/", 1)[-1]
        assert app.extensions["nova"].client.job(job, with_tasks=False).owner == "lab-gallery"
    finally:
        app.extensions["nova"].close()


@pytest.mark.parametrize("lines, needle", [
    ("backend=cuda\nmemory_gb>=lots", "requirements:2: --require &#39;memory_gb&gt;=lots&#39;"),
    ("gpu 4090", "requirements:1: --require &#39;gpu 4090&#39;"),
])
def test_the_form_refuses_a_bad_requirement_and_enqueues_nothing(client, nova, lines, needle):
    resp = post_job(client, requires=lines)
    html = resp.get_data(as_text=True)
    assert resp.status_code == 400 and needle in html
    assert job_count(nova) == 0
    assert "memory_gb&gt;=lots" in html or "gpu 4090" in html  # the form keeps what was typed


def test_the_job_page_warns_while_no_live_worker_meets_the_job(client, nova):
    nova.register_worker("small", {"name": "small", "labels": json.dumps({"memory_gb": "8"})},
                         ["synthetic"])
    job = enqueue(nova, ["a"], requires=["memory_gb>=12"])
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert ("No live worker of app &#39;synthetic&#39; meets this job&#39;s requirements: "
            "requirement memory_gb&gt;=12 is met by no live worker") in html
    assert json.loads(client.get(f"/api/jobs/{job}").get_data())["eligible_workers"] == 0
    nova.register_worker("big", {"name": "big", "labels": json.dumps({"memory_gb": "24"})},
                         ["synthetic"])
    html = client.get(f"/jobs/{job}").get_data(as_text=True)
    assert "meets this job" not in html
    assert json.loads(client.get(f"/api/jobs/{job}").get_data())["eligible_workers"] == 1
