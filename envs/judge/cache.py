"""The judge cache: parsed results by key, an LRU dict in memory optionally backed by SQLite."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from tinker_cookbook.renderers import Message


def cache_key(judge_id: str, namespace: str, prompt: Sequence[Message]) -> str:
    """Stable key of a judge call: sha256 of (judge id, task namespace, prompt messages)."""
    payload = json.dumps([judge_id, namespace, list(prompt)], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class JudgeCache:
    """Parsed judge results by key: an LRU dict in memory, optionally backed by a SQLite file.

    The file is opened in WAL mode with a busy timeout, so several threads and processes can
    share it; a write that loses a race simply keeps the other writer's (equivalent) value.
    """

    def __init__(self, path: str | Path | None = None, *, max_entries: int = 100_000):
        self.path = Path(path).expanduser() if path is not None else None
        self.max_entries = max_entries
        self._memory: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _db(self) -> sqlite3.Connection | None:
        if self.path is None:
            return None
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(
                str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None
            )
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value REAL, reply TEXT)")
            self._conn = conn
        return self._conn

    def get(self, key: str) -> tuple[float, str] | None:
        """The cached ``(value, reply)`` of ``key``, or None."""
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                self._memory.move_to_end(key)
                return hit
            db = self._db()
            if db is None:
                return None
            row = db.execute("SELECT value, reply FROM verdicts WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            hit = (float(row[0]), str(row[1]))
            self._remember(key, hit)
            return hit

    def put(self, key: str, value: float, reply: str) -> None:
        """Store a parsed result."""
        with self._lock:
            self._remember(key, (value, reply))
            db = self._db()
            if db is not None:
                db.execute(
                    "INSERT OR REPLACE INTO verdicts (key, value, reply) VALUES (?, ?, ?)",
                    (key, value, reply),
                )

    def _remember(self, key: str, entry: tuple[float, str]) -> None:
        self._memory[key] = entry
        self._memory.move_to_end(key)
        while len(self._memory) > self.max_entries:
            self._memory.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            db = self._db()
            if db is None:
                return len(self._memory)
            return int(db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        """Close the file (the memory part stays usable)."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


_DISK_CACHES: dict[str, JudgeCache] = {}
_DISK_CACHES_LOCK = threading.Lock()


def shared_cache(path: str) -> JudgeCache:
    """The process-wide :class:`JudgeCache` of a SQLite file (one per resolved path)."""
    resolved = str(Path(path).expanduser().resolve())
    with _DISK_CACHES_LOCK:
        cache = _DISK_CACHES.get(resolved)
        if cache is None:
            cache = _DISK_CACHES[resolved] = JudgeCache(resolved)
        return cache
