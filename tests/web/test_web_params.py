"""The demo's gallery shows a job's params without the test-only ones (``crash_on``,
``oom_on``) unless a job set them."""

from __future__ import annotations

from novatests.web import enqueue


def test_test_only_params_show_only_when_set(client, nova):
    plain = enqueue(nova, ["a lighthouse"])
    page = client.get(f"/jobs/{plain}").get_data(as_text=True)
    assert "seconds=0.0" in page
    assert "crash_on" not in page and "oom_on" not in page
    assert set(nova.job(plain, with_tasks=False).params) == {"seconds", "size", "jitter",
                                                             "jitter_seed"}
    poisoned = enqueue(nova, ["boom"], params={"crash_on": "boom"})
    assert "crash_on=boom" in client.get(f"/jobs/{poisoned}").get_data(as_text=True)
