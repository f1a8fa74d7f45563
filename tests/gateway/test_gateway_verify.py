"""Gateway workers are not trusted unless their token says so: the gateway registers each
with its token's trust and owner (``tokens create --trust --owner``), never the worker's
word, and as a verifier that fetches the results it checks (``POST /v1/candidate``, only
with the verification lease). A new token's result is held until a direct worker or another
owner's gateway worker re-runs it and agrees; a worker that is not trusted never verifies
one of its own owner's results, and never has the last word."""

from __future__ import annotations

import io
import json

from novatests.gateway import FIELDS, auth, claim, commit, join

from nova_queue import TaskSpec, tokens
from nova_queue.keys import result_key


def test_a_worker_takes_its_tokens_trust_whatever_it_says(gw, admin, make_token):
    lying = {**FIELDS, "trust": "trusted", "verifier": "0", "owner": "someone-else"}
    new = join(gw, make_token("fresh", trust="new"), fields=lying)
    vouched = join(gw, make_token("vouched", trust="trusted"), fields={**FIELDS, "trust": "new"})
    h = admin.redis.hgetall(admin.keys.worker(new))
    assert (h["trust"], h["verifier"], h["owner"]) == ("new", "1", "fresh")
    h = admin.redis.hgetall(admin.keys.worker(vouched))
    assert "trust" not in h and (h["verifier"], h["owner"]) == ("1", "vouched")
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


def _held(gw, admin, token: str, data: bytes) -> tuple[dict, str]:
    """A one-task job whose result ``token``'s worker commits (``data``) and that is held
    for verification, as if it had waited past VERIFY_WAIT_MS: (its lease, result key)."""
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, token).json["leases"][0]
    res, key = commit(gw, token, lease, data=data)
    assert res.status_code == 200 and res.json["job_finished"] is False
    admin.redis.hset(admin.keys.task(lease["task_id"]), "v_since_ms", 0)
    return lease, key


def _fence(lease: dict) -> dict:
    return {k: lease[k] for k in ("task_id", "app", "lease_gen", "attempt_id")}


def test_another_owners_gateway_worker_verifies_through_the_gateway(gw, admin, make_token):
    maker = make_token("alice-pc", trust="new", owner="alice")
    mine = make_token("alice-laptop", trust="new", owner="alice")
    theirs = make_token("bob-pc", trust="new", owner="bob")
    maker_id, _, bob_id = join(gw, maker), join(gw, mine), join(gw, theirs)
    lease, key = _held(gw, admin, maker, b"alice's result")
    assert admin.task(lease["task_id"]).state == "verifying"
    # a worker of the maker's owner is never offered the check, another owner's is
    assert claim(gw, mine, ids=("m1",)).json["leases"] == []
    [check] = claim(gw, theirs, ids=("b1",)).json["leases"]
    assert (check["task_id"], check["verify"]) == (lease["task_id"], {"cand": key})
    # only the verification's holder reads the candidate, and gets its bytes
    body = {"lease": _fence(check), "slot": "cand"}
    assert gw.post("/v1/candidate", json=body, headers=auth(mine)).status_code == 403
    assert gw.post("/v1/candidate", json={**body, "slot": "x"},
                   headers=auth(theirs)).status_code == 400
    res = gw.post("/v1/candidate", json=body, headers=auth(theirs))
    assert res.status_code == 200 and res.data == b"alice's result"
    assert gw.post("/v1/candidate", json={**body, "slot": "cand2"},
                   headers=auth(theirs)).status_code == 404
    res, _ = commit(gw, theirs, check, data=b"bob's run")
    # no verdict in its meta (it could not compare): no opinion, the check is handed on
    assert res.status_code == 200
    h = admin.redis.hgetall(admin.keys.task(lease["task_id"]))
    assert (h["state"], h["v_tries"], h["cand_wid"], "cand2" in h) == (
        "verifying", "1", maker_id, False)
    assert admin.redis.zscore(admin.keys.verify("synthetic"), lease["task_id"]) is not None
    assert {w.worker_id: w.owner for w in admin.workers()}[bob_id] == "bob"
    assert maker_id.startswith("alice-pc.")


def test_an_untrusted_verifiers_agreement_lets_the_result_stand(gw, admin, make_token):
    maker = make_token("m", trust="new", owner="alice")
    checker = make_token("c", trust="new", owner="bob")
    join(gw, maker)
    checker_id = join(gw, checker)
    lease, key = _held(gw, admin, maker, b"same")
    [check] = claim(gw, checker, ids=("c1",)).json["leases"]
    fence = _fence(check)
    own = result_key(check["job_id"], check["index"], check["lease_gen"], check["attempt_id"],
                     "png")
    res = gw.post("/v1/complete", headers=auth(checker), data={
        "commit": json.dumps({"lease": fence, "key": own, "run_s": 0.1, "warm": True,
                              "meta": {"verify": {"cand": "agree"}}}),
        "content_type": "image/png", "metadata": json.dumps({"app": "synthetic"}),
        "data": (io.BytesIO(b"same"), "result")})
    assert res.status_code == 200 and res.json["job_finished"] is True
    t = admin.task(lease["task_id"])
    assert (t.state, t.result, t.verified_by) == ("done", key, checker_id)


def test_a_maker_whose_only_verifiers_share_its_owner_is_not_held(gw, admin, make_token):
    maker = make_token("m", trust="new", owner="carol")
    join(gw, maker)
    join(gw, make_token("m2", trust="new", owner="carol"))
    admin.enqueue("synthetic", [TaskSpec("one", 1.0)])
    lease = claim(gw, maker).json["leases"][0]
    res, _ = commit(gw, maker, lease)
    # nobody may verify it: it stands unverified (re-run if its maker is caught later)
    assert res.status_code == 200 and res.json["job_finished"] is True
    assert admin.redis.zrange(admin.keys.unverified("m"), 0, -1) == [lease["task_id"]]


def test_tokens_create_takes_an_owner(admin, redis_url, namespace):
    from click.testing import CliRunner

    from nova_queue.cli import cli

    env = {"NOVA_REDIS_URL": redis_url, "NOVA_NAMESPACE": namespace}
    run = CliRunner().invoke
    assert run(cli, ["tokens", "create", "pc", "--owner", "dana@example"], env=env).exit_code == 0
    assert run(cli, ["tokens", "create", "solo"], env=env).exit_code == 0
    res = run(cli, ["tokens", "create", "bad", "--owner", "a b"], env=env)
    assert res.exit_code != 0 and "invalid owner 'a b'" in res.output
    assert {t.name: t.owner for t in tokens.list_tokens(admin)} == {"pc": "dana@example",
                                                                    "solo": "solo"}
    assert "owner dana@example" in run(cli, ["tokens", "list"], env=env).output


def test_a_lease_asks_whether_it_verifies(gw, admin, make_token):
    """POST /v1/verification: the candidates a lease verifies (a backup that became a free
    sample asks before it commits), null for a plain lease, 403 for another's lease."""
    maker = make_token("m", trust="new", owner="alice")
    checker = make_token("c", trust="new", owner="bob")
    join(gw, maker)
    join(gw, checker)
    _, key = _held(gw, admin, maker, b"r")
    [check] = claim(gw, checker, ids=("c1",)).json["leases"]
    ask = {"lease": _fence(check)}
    res = gw.post("/v1/verification", json=ask, headers=auth(checker))
    assert res.status_code == 200 and res.json == {"verify": {"cand": key}}
    assert gw.post("/v1/verification", json=ask, headers=auth(maker)).status_code == 403
    admin.enqueue("synthetic", [TaskSpec("two", 1.0)])
    [plain] = claim(gw, maker, ids=("m2",)).json["leases"]
    res = gw.post("/v1/verification", json={"lease": _fence(plain)}, headers=auth(maker))
    assert res.status_code == 200 and res.json == {"verify": None}
