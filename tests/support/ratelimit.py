"""Many requests of one user through a rate limiter at the same moment."""

from __future__ import annotations

import threading

from django.db import connection

CONCURRENT = 50


def hits_at_once(user, limiter, count: int) -> list[int | None]:
    """`count` requests of `user` through `limiter`, each on its own thread and database
    connection, released together."""
    barrier = threading.Barrier(count)
    results: list[int | None] = [None] * count
    errors: list[BaseException] = []

    def one(position: int) -> None:
        try:
            barrier.wait(timeout=30)
            results[position] = limiter(user)
        except BaseException as exc:  # reported by the test, not lost in a thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    return results
