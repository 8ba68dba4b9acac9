"""``async for batch in consumer``: a consumer's waits on the running asyncio loop.

The loop sleeps on the consumer's wait descriptor (``Consumer.wait_fd``), so one
thread waits on any number of topics: no thread per consumer, no polling. A
producer sounds the descriptor as it would wake a futex; one that dies sounds
nothing (the broker tells the consumer a little later), so a sleep also ends
after ``DEAD_PRODUCER_POLL`` seconds to look again.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: Seconds a sleep on the descriptor lasts at most (a dead producer wakes
#: nobody; the consumer learns of it from the broker between two looks).
DEAD_PRODUCER_POLL = 0.1


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def anext(consumer: Any) -> Any:
    """The next batch of `consumer`, awaited on the running loop.

    Raises StopAsyncIteration at the end of the stream, and what
    ``Consumer.try_next`` raises otherwise (InvalidError once closed). A
    cancelled await leaves the consumer as it was: the batch it would have
    received is the next one's.
    """
    loop = asyncio.get_running_loop()
    ready_in_a_row = 0
    while True:
        try:
            batch = consumer.try_next()
        except StopIteration:
            raise StopAsyncIteration from None
        if batch is not None:
            return batch
        fd = consumer.wait_fd()  # made on the first call, then the same
        # A batch that came between the look and the arming is taken
        # instead of sleeping; a few times at most (a channel that keeps
        # saying so without giving a batch must not keep the loop busy).
        if consumer.arm_wait() and ready_in_a_row < 4:
            ready_in_a_row += 1
            continue
        ready_in_a_row = 0
        ready = loop.create_future()
        loop.add_reader(fd, _wake, ready)
        timer = loop.call_later(DEAD_PRODUCER_POLL, _wake, ready)
        try:
            await ready
        finally:
            timer.cancel()
            loop.remove_reader(fd)
