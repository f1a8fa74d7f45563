"""Gateway workers are not trusted unless their token says so: the gateway registers each
with its token's trust (``tokens create --trust``), never the worker's word, and never as a
verifier (it could not fetch others' results). A new token's result is held until a direct
worker re-runs it and agrees."""

from __future__ import annotations

from novatests.gateway import FIELDS, claim, commit, join

from nova_queue import TaskSpec
from nova_queue.keys import result_key


def test_a_worker_takes_its_tokens_trust_whatever_it_says(gw, admin, make_token):
    lying = {**FIELDS, "trust": "trusted", "verifier": "1"}
    new = join(gw, make_token("fresh", trust="new"), fields=lying)
    vouched = join(gw, make_token("vouched", trust="trusted"), fields={**FIELDS, "trust": "new"})
    h = admin.redis.hgetall(admin.keys.worker(new))
    assert (h["trust"], h["verifier"]) == ("new", "0")
    h = admin.redis.hgetall(admin.keys.worker(vouched))
    assert "trust" not in h and h["verifier"] == "0"
    info = {w.worker_id: w for w in admin.workers()}
    assert (info[new].trust, info[new].vouched) == ("new", False)
    assert (info[vouched].trust, info[vouched].vouched) == ("trusted", True)


def test_a_new_tokens_result_waits_for_a_direct_worker_to_agree(gw, admin, make_token):
    token = make_token("fresh", trust="new")
    wid = join(gw, token)
    admin.register_worker("direct", {"name": "direct", "verifier": "1"}, ["synthetic"])
    job = admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token).json["leases"][0]
    res, key = commit(gw, token, lease)
    assert res.status_code == 200 and res.json["job_finished"] is False
    assert admin.task(lease["task_id"]).state == "verifying"
    [check] = admin.claim("direct", "synthetic").leases
    assert check.verify == {"cand": key}
    own = result_key(check.job_id, check.index, check.lease_gen, check.attempt_id, "png")
    admin.complete("direct", check, own, run_s=0.1, warm=True,
                   meta={"verify": {"cand": "agree"}})
    t = admin.task(lease["task_id"])
    assert (t.state, t.worker_id, t.result, t.verified_by) == ("done", wid, key, "direct")
    assert admin.job(job, with_tasks=False).state == "done"


def test_a_token_list_shows_its_trust(admin, make_token):
    from nova_queue import tokens

    make_token("a", trust="new")
    make_token("b")
    assert {t.name: t.trust for t in tokens.list_tokens(admin)} == {"a": "new", "b": "trusted"}
    assert tokens.list_tokens(admin)[0].to_json()["trust"] == "new"


def test_tokens_create_takes_trust_and_list_shows_it(redis_url, namespace):
    from click.testing import CliRunner

    from nova_queue.cli import cli

    env = {"NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace}
    run = CliRunner().invoke
    res = run(cli, ["tokens", "create", "mine", "--trust", "trusted"], env=env)
    assert res.exit_code == 0, res.output
    res = run(cli, ["tokens", "create", "theirs"], env=env)
    assert res.exit_code == 0, res.output
    res = run(cli, ["tokens", "create", "odd", "--trust", "sure"], env=env)
    assert res.exit_code == 2 and "'sure' is not one of 'new', 'trusted'" in res.output
    listed = run(cli, ["tokens", "list"], env=env).output
    assert "mine" in listed and "trust trusted" in listed and "trust new" in listed
    assert "odd" not in listed
