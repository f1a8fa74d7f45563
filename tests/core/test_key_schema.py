"""One key schema, the keyspace docstring (``nova_queue/keys.py``), and everything that names
keys checked against it: each Lua script's header (its ``KEYS[n]`` lines: a type and a key
template), the keys the client really passes each script (recorded from real calls), and
the doctor's tables of key names (``nova_queue/doctor/scan.py``). A key renamed in one
place and not the others fails here."""

from __future__ import annotations

import re
from importlib import resources

from novatests.leases import commit, join, rkey, setup_job

import nova_queue.keys as keys_module
from nova_queue import doctor
from nova_queue.client import BatchCommit
from nova_queue.doctor.scan import SHAPES, SINGLETONS, scan_keys
from nova_queue.scripts import script_sources

LUA = resources.files("nova_queue.lua")
#: a key template as the schema and the headers write it
TEMPLATE = r"nova:\{ns\}:(?:[A-Za-z0-9_.:-]|<[^>]+>)+"
#: a header's KEYS line: index, what the key is, its type, its template (then a remark)
KEYS_LINE = re.compile(rf"^\s*KEYS\[(\d+)\]\s+(.*?)\s*\b(hash|zset|set|stream|counter)\s+"
                       rf"({TEMPLATE})", re.MULTILINE)
#: header placeholders that stand for a schema placeholder (complete_claim and
#: complete_batch claim for an app that may differ from the committed task's)
PLACEHOLDER_ALIASES = {"<claim app>": "<app>"}
#: the headers' word for a schema type
TYPE_ALIASES = {"counter": "string"}
WID, APP = "n1.w1", "synthetic"
#: a legal value of each schema placeholder
SAMPLES = {"<job>": "01J9ZKQ3AB", "<index>": "7", "<app>": APP, "<wid>": WID,
           "<owner>": "alice", "<digest>": "ab" * 32, "<client>": "203.0.113.9",
           "<window>": "57812", "<ident>": "n1"}


def schema() -> dict[str, str]:
    """``{template: type}`` of the schema's table."""
    return dict(re.findall(rf"^({TEMPLATE})\s+(\w+)", keys_module.__doc__, re.MULTILINE))


def header_keys(name: str) -> list[tuple[int, str, str]]:
    """``[(n, type, template)]`` of the script ``name``'s header, in order."""
    [path] = [e for e in LUA.iterdir() if re.fullmatch(rf"{name}-\d+\.lua", e.name)]
    text = path.read_text()
    header = text[:text.index("]]")]
    return [(int(n), kind, template) for n, _, kind, template in KEYS_LINE.findall(header)]


def canonical(template: str) -> str:
    for alias, name in PLACEHOLDER_ALIASES.items():
        template = template.replace(alias, name)
    return template


def test_every_header_key_line_is_read():
    for name, (numkeys, _) in script_sources().items():
        assert [n for n, _, _ in header_keys(name)] == list(range(1, numkeys + 1)), name


def test_every_header_key_is_a_schema_key_of_its_type():
    keys = schema()
    assert len(keys) > 30
    wrong = [f"{name} KEYS[{n}] {kind} {template}"
             for name in script_sources() for n, kind, template in header_keys(name)
             if keys.get(canonical(template)) != TYPE_ALIASES.get(kind, kind)]
    assert wrong == []


# -- the keys the client passes: recorded from real calls of every script -------------------

def record_calls(nova) -> list[tuple[str, list[str]]]:
    """Every script call of ``nova`` from now on, as ``(name, keys)``: through its caller,
    and queued on a pipeline (the doctor's confirmations)."""
    calls: list[tuple[str, list[str]]] = []
    run, queue = nova.caller.run, nova.scripts.queue

    def recording_run(name, keys, args):
        calls.append((name, list(keys)))
        return run(name, keys, args)

    def recording_queue(pipe, name, keys, args):
        calls.append((name, list(keys)))
        return queue(pipe, name, keys, args)

    nova.caller.run, nova.scripts.queue = recording_run, recording_queue
    return calls


def run_every_script(nova) -> None:
    """One call of each script, as the client and the doctor make them."""
    join(nova, WID)
    job = setup_job(nova, 6, max_attempts=1)
    [first] = nova.claim(WID, APP, 1).leases
    nova.renew(WID, [first])
    nova.note_loading(WID, APP, "m")
    nova.note_loaded(WID, APP, "m", 0.5)
    _, then = nova.complete_and_claim(WID, first, rkey(first), run_s=0.1, warm=True)
    commit(nova, WID, then.leases[0])
    batched, failing = nova.claim(WID, APP, 2).leases
    nova.complete_batch(WID, [BatchCommit(batched, rkey(batched), 0.1, True)], app=APP)
    nova.fail(WID, failing, "error", "boom")
    nova.retry(failing.task_id)
    nova.cancel(job)
    nova.purge(job)
    nova.expire()
    nova.set_quarantine(WID, True, reason="test")
    nova.reap()
    nova.deregister_worker(WID)
    nova.producer.abort(setup_job(nova, 1))
    doctor.diagnose(nova)


def key_pattern(prefix: str, template: str) -> re.Pattern[str]:
    """``template`` as a pattern of keys under ``prefix``, a group per placeholder."""
    body = re.escape(template.removeprefix("nova:{ns}:"))
    for i, holder in enumerate(re.findall(r"<[^>]+>", template)):
        body = body.replace(re.escape(holder), f"(?P<p{i}>[^:]+)", 1)
    return re.compile(re.escape(prefix) + body + r"\Z")


def mismatches(prefix: str, name: str, keys: list[str]) -> list[str]:
    """How the keys of one call of ``name`` differ from its header: a key of another shape,
    or one placeholder standing for two values in one call."""
    header = header_keys(name)
    if len(keys) != len(header):
        return [f"{name}: {len(keys)} keys for {len(header)} in its header"]
    bound: dict[str, str] = {"<wid>": WID, "<app>": APP, "<claim app>": APP}
    wrong = []
    for (n, _, template), key in zip(header, keys):
        m = key_pattern(prefix, template).match(key)
        if m is None:
            wrong.append(f"{name} KEYS[{n}] is {key!r}, its header says {template}")
            continue
        for holder, value in zip(re.findall(r"<[^>]+>", template), m.groups()):
            if bound.setdefault(holder, value) != value:
                wrong.append(f"{name} KEYS[{n}] {key!r}: {holder} is {bound[holder]!r} in "
                             "another key of the call")
    return wrong


def test_the_client_passes_each_script_the_keys_its_header_lists(nova):
    calls = record_calls(nova)
    run_every_script(nova)
    assert {name for name, _ in calls} == set(script_sources())
    assert [w for name, keys in calls for w in mismatches(nova.prefix, name, keys)] == []


def test_the_check_finds_a_swapped_and_a_renamed_key(nova):
    keys = list(nova.worker.claim_keys(WID, APP))
    assert mismatches(nova.prefix, "claim", keys) == []
    swapped = [keys[0], keys[1], keys[2], keys[4], keys[3], *keys[5:]]
    assert len(mismatches(nova.prefix, "claim", swapped)) == 2
    renamed = [keys[0].replace(":pending:", ":queued:"), *keys[1:]]
    assert mismatches(nova.prefix, "claim", renamed) == [
        f"claim KEYS[1] is {renamed[0]!r}, its header says nova:{{ns}}:pending:<app>"]
    other_worker = [*keys[:2], nova.keys.held("n2.w9"), *keys[3:]]
    assert "<wid>" in mismatches(nova.prefix, "claim", other_worker)[0]


# -- the doctor's tables of key names ---------------------------------------------------------

def sample(template: str) -> str:
    """The key name (after the prefix) of ``template`` with legal ids."""
    name = template.removeprefix("nova:{ns}:")
    for holder, value in SAMPLES.items():
        name = name.replace(holder, value)
    assert "<" not in name, template
    return name


def test_the_doctors_singletons_are_the_schemas_keys_without_ids():
    assert SINGLETONS == {sample(t) for t in schema() if "<" not in t}


def test_each_key_with_ids_has_exactly_one_doctor_shape_and_each_shape_a_key():
    used = set()
    for template in (t for t in schema() if "<" in t):
        name = sample(template)
        kinds = [(kind, m) for kind, pattern in SHAPES if (m := pattern.match(name))]
        assert len(kinds) == 1, f"{template}: shapes {[k for k, _ in kinds]}"
        kind, m = kinds[0]
        used.add(kind)
        # the id a shape captures is the one in the key's name (job, app or worker id)
        if m.groups():
            first = re.findall(r"<[^>]+>", template)[0]
            assert m.group(1) == SAMPLES[first], template
    assert used == {kind for kind, _ in SHAPES}


def test_the_doctor_files_no_key_of_the_schema_as_unknown(nova, r):
    """Every key a real run leaves is one the scan knows (no orphans of the schema's own)."""
    run_every_script(nova)
    setup_job(nova, 2)
    scan = scan_keys(r, nova.keys)
    assert scan.keys > 10 and scan.unknown == []
