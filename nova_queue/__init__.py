"""nova-queue: a Redis-backed task queue for mixed GPU and CPU fleets.

Public API::

    from nova_queue import NovaClient, Settings
    client = NovaClient.from_settings(Settings.from_env())
    job_id = client.enqueue("synthetic", [TaskSpec("a prompt")])
"""

__version__ = "0.1.0"

from nova_queue.client import NovaClient
from nova_queue.errors import NovaError
from nova_queue.models import TaskSpec
from nova_queue.settings import Settings

__all__ = ["NovaClient", "NovaError", "Settings", "TaskSpec", "__version__"]
