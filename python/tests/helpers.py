"""Constants and small helpers shared by the tests (importable: pytest puts this folder on
sys.path)."""

import threading

# Generous rendezvous time-out: only reached when work that must overlap ran serially (or
# something hung); never a performance bound.
RENDEZVOUS_S = 60

# Worker counts that concurrency-relevant tests run at.
WORKER_COUNTS = [1, 2, 4, 8]


class Recorder:
    """A thread-safe list of what happened, in order."""

    def __init__(self):
        self._lock = threading.Lock()
        self.items = []

    def __call__(self, item):
        with self._lock:
            self.items.append(item)
