"""The one retry policy of rpquery's internal retries: attempts, jittered exponential
backoff, and a warning log line on every retry and every give-up.

Every write that retries on its own (allocation writes, scheduling picks, server-group
membership changes, tag writes, custom class ids) goes through :func:`retrying` with a
:class:`RetryPolicy`, so attempts, delays and logging are the same everywhere.

The delay before attempt ``n + 1`` is "full jitter" exponential backoff: a uniform
random time in ``[0, min(cap, base * 2 ** (n - 1))]``. Racing writers therefore spread
out instead of colliding again in lock step, and a long run of conflicts waits at most
``cap`` between attempts.

>>> policy = RetryPolicy(attempts=4, base=0.01, cap=0.05)
>>> [policy.ceiling(n) for n in (1, 2, 3, 4)]
[0.01, 0.02, 0.04, 0.05]
>>> calls = []
>>> def flaky() -> str:
...     calls.append(1)
...     if len(calls) < 3:
...         raise ValueError("busy")
...     return "done"
>>> retrying(flaky, policy, retry_if=lambda e: isinstance(e, ValueError),
...          logger="rpquery.write", what="example", sleep=lambda s: None)
'done'
>>> len(calls)
3

Every retry and every give-up is one WARNING on the logger of the layer that retries
(``rpquery.write``, ``rpquery.server_groups``, ``rpquery.tags``, ``rpquery.store``),
naming what was retried, the attempt, the error's code and its message::

    allocation write: attempt 1 of 10 failed (rpquery.allocation.provider_generation_conflict:
    ...); retrying in 3 ms
    allocation write: giving up after 10 attempts (rpquery.concurrent_update: ...)

rpquery installs a :class:`logging.NullHandler` on ``rpquery``, so nothing is printed
unless the application configures logging (docs/architecture.md#logging). Each record
carries ``record.rpquery_retry``: a :class:`RetryEvent` (what, attempt, attempts,
delay, error code, whether it gave up).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "ALLOCATION_WRITES",
    "LOCKED_WRITES",
    "SCHEDULER_PICKS",
    "RetryEvent",
    "RetryPolicy",
    "retrying",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry: ``attempts`` in all (the first included),
    backoff ``base`` seconds doubling per attempt up to ``cap``, full jitter."""

    attempts: int
    base: float = 0.005
    cap: float = 0.25

    def ceiling(self, attempt: int) -> float:
        """The longest wait after failed attempt number ``attempt`` (1-based)."""
        return min(self.cap, self.base * 2 ** (attempt - 1))

    def delay(self, attempt: int) -> float:
        """A random wait in ``[0, ceiling(attempt)]``."""
        return random.uniform(0.0, self.ceiling(attempt))  # noqa: S311 - jitter, not crypto


#: Allocation writes (claims, replace, delete, the reshaper): a provider generation
#: conflict or a deadlock means another writer got there first; try again on fresh data.
ALLOCATION_WRITES = RetryPolicy(attempts=10, base=0.005, cap=0.25)
#: One scheduling pick (candidates + claim) per attempt; a group or provider conflict
#: means the pick was made on stale data.
SCHEDULER_PICKS = RetryPolicy(attempts=10, base=0.01, cap=0.4)
#: Short writes that lock their rows first (server-group membership, tags, custom
#: class ids): conflicts are rare and resolve quickly.
LOCKED_WRITES = RetryPolicy(attempts=8, base=0.005, cap=0.2)


@dataclass(frozen=True)
class RetryEvent:
    """What a retry or give-up log record says, attached as ``record.rpquery_retry``."""

    what: str
    attempt: int
    attempts: int
    delay: float
    code: str
    gave_up: bool


def _code(error: BaseException) -> str:
    return str(getattr(error, "code", type(error).__name__))


def _detail(error: BaseException) -> str:
    """The message without the code (an rpquery error's ``str`` ends with it)."""
    return str(getattr(error, "detail", error))


def retrying(
    work: Callable[[], T],
    policy: RetryPolicy,
    *,
    retry_if: Callable[[Exception], bool],
    logger: str,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``work()`` until it returns, up to ``policy.attempts`` times.

    An exception for which ``retry_if`` is true is logged (warning on ``logger``) and
    retried after a jittered backoff; when attempts run out it is logged as a give-up
    and re-raised. Any other exception goes straight to the caller, unlogged.
    """
    log = logging.getLogger(logger)
    for attempt in range(1, policy.attempts + 1):
        try:
            return work()
        except Exception as error:
            if not retry_if(error):
                raise
            if attempt == policy.attempts:
                event = RetryEvent(what, attempt, policy.attempts, 0.0, _code(error), True)
                log.warning(
                    "%s: giving up after %d attempts (%s: %s)",
                    what,
                    attempt,
                    event.code,
                    _detail(error),
                    extra={"rpquery_retry": event},
                )
                raise
            delay = policy.delay(attempt)
            event = RetryEvent(what, attempt, policy.attempts, delay, _code(error), False)
            log.warning(
                "%s: attempt %d of %d failed (%s: %s); retrying in %.0f ms",
                what,
                attempt,
                policy.attempts,
                event.code,
                _detail(error),
                delay * 1000,
                extra={"rpquery_retry": event},
            )
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover
