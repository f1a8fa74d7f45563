"""The key strings are exactly what the keyspace docstring (the schema) says."""

import re

import pytest
import redis

import nova_queue.keys as keys_module
from nova_queue.keys import NAMESPACE_RE, Keyspace, split_task_id, task_id

K = Keyspace("ns1")

BUILT = {
    "nova:{ns}:job:<job>": K.job("J"),
    "nova:{ns}:task:<job>:<index>": K.task(task_id("J", 7)),
    "nova:{ns}:inline:<job>:<index>": K.inline(task_id("J", 7)),
    "nova:{ns}:jobs": K.jobs(),
    "nova:{ns}:staging": K.staging(),
    "nova:{ns}:stage:<job>": K.stage("J"),
    "nova:{ns}:pending:<app>": K.pending("A"),
    "nova:{ns}:leases": K.leases(),
    "nova:{ns}:inflight": K.inflight(),
    "nova:{ns}:seq": K.seq(),
    "nova:{ns}:apps": K.apps(),
    "nova:{ns}:failed": K.failed(),
    "nova:{ns}:finished": K.finished(),
    "nova:{ns}:expiring": K.expiring(),
    "nova:{ns}:expired": K.expired(),
    "nova:{ns}:departed": K.departed(),
    "nova:{ns}:idents": K.idents(),
    "nova:{ns}:workers": K.workers(),
    "nova:{ns}:alive": K.alive(),
    "nova:{ns}:worker:<wid>": K.worker("W"),
    "nova:{ns}:held:<wid>": K.held("W"),
    "nova:{ns}:app:<app>:workers": K.app_workers("A"),
    "nova:{ns}:app:<app>:fleet": K.app_fleet("A"),
    "nova:{ns}:app:<app>:warm": K.app_warm("A"),
    "nova:{ns}:app:<app>:owners": K.app_owners("A"),
    "nova:{ns}:app:<app>:owner:<owner>": K.app_owner_queue("A", "O"),
    "nova:{ns}:usage": K.usage(),
    "nova:{ns}:shares": K.shares(),
    "nova:{ns}:meta": K.meta(),
    "nova:{ns}:events": K.events(),
    "nova:{ns}:web:session:<digest>": K.web_session("D"),
    "nova:{ns}:web:fails:<client>": K.web_unlock_fails("C"),
    "nova:{ns}:tokens": K.tokens(),
    "nova:{ns}:verify:<app>": K.verify("A"),
    "nova:{ns}:trust:<ident>": K.trust("I"),
    "nova:{ns}:unverified:<ident>": K.unverified("I"),
    "nova:{ns}:token:<digest>": K.token("D"),
    "nova:{ns}:gw:rate:<digest>:<window>": K.gateway_rate("D", 9),
}


def documented_templates() -> list[str]:
    return re.findall(r"^(nova:\{ns\}:\S+)\s+\w+", keys_module.__doc__, re.MULTILINE)


def test_every_documented_key_is_built_and_nothing_else():
    assert sorted(documented_templates()) == sorted(BUILT)


def test_key_strings_match_their_templates():
    for template, built in BUILT.items():
        expected = (template.replace("{ns}", "{ns1}").replace("<job>", "J")
                    .replace("<index>", "7").replace("<app>", "A").replace("<wid>", "W")
                    .replace("<digest>", "D").replace("<client>", "C").replace("<owner>", "O")
                    .replace("<window>", "9")
                    .replace("<ident>", "I"))
        assert built == expected


def test_pinned_literals():
    assert K.prefix == "nova:{ns1}:"
    assert K.task("J:7") == "nova:{ns1}:task:J:7"
    assert K.app_fleet("txt2img") == "nova:{ns1}:app:txt2img:fleet"
    assert Keyspace().job("x") == "nova:{default}:job:x"


def test_every_key_shares_one_cluster_hash_tag():
    for built in BUILT.values():
        assert re.search(r"\{([^}]*)\}", built).group(1) == "ns1"


def test_task_ids_round_trip():
    assert split_task_id(task_id("01abc", 42)) == ("01abc", 42)


# -- namespaces: a short safe alphabet, everywhere a namespace is read ------------------------

BAD_NAMESPACES = ["*", "?", "[a-z]*", "d\\efault", "", "a b", "a:b", "{a}", "ns\r", "ns\n",
                  "\x1b[31mred", "evil\u202egnp", "é", "x" * 65, "x" * 100_000]


@pytest.mark.parametrize("ns", BAD_NAMESPACES)
def test_namespaces_outside_the_safe_alphabet_are_refused_everywhere(ns):
    from nova_queue import NovaClient, Settings
    from nova_queue.errors import ConfigError

    builders = [lambda: Keyspace(ns), lambda: Settings(namespace=ns),
                lambda: NovaClient(redis.Redis(), namespace=ns)]
    if ns:  # NOVA_NAMESPACE= (empty) means the default, as for every variable
        builders.append(lambda: Settings.from_env(environ={"NOVA_NAMESPACE": ns}))
        # an RQ job carries its namespace as an argument: the post-worker reads it too
        from nova_queue.post.jobs import context_for
        builders.append(lambda: context_for(ns))
    for build in builders:
        with pytest.raises(ConfigError, match="invalid namespace") as err:
            build()
        assert "\n" not in str(err.value) and len(str(err.value)) < 200


@pytest.mark.parametrize("ns", ["default", "a", "prod-2.eu_west", "x" * 64, "t-test_x-1a2b3c4d"])
def test_safe_namespaces_are_accepted(ns):
    assert NAMESPACE_RE.match(ns) and Keyspace(ns).prefix == f"nova:{{{ns}}}:"


def test_one_namespace_pattern_and_the_acl_glob_characters():
    # the documented ACL rule ~nova:{NAMESPACE}:* is a glob: no namespace may contain one
    from nova_queue import settings

    for glob in "*?[]\\":
        assert not NAMESPACE_RE.match(f"a{glob}b")
    assert settings.check_namespace is keys_module.check_namespace
