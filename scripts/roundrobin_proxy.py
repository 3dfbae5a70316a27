"""A round-robin TCP proxy: each client connection goes to the next upstream in turn.

    python scripts/roundrobin_proxy.py --listen 127.0.0.1:4409 \
        --to 127.0.0.1:4406,127.0.0.1:4407,127.0.0.1:4408

It is what HAProxy's ``mode tcp`` + ``balance roundrobin`` does in front of a Galera
cluster, with no dependency: the tests' ``galera`` backend (tests/galera_cluster.py)
reaches the three nodes through it, so every connection a test, a worker thread or a
forked writer process opens lands on the next node. An upstream that refuses the
connection (a node that is down) is skipped for the next one. Bytes are relayed
unchanged; a connection closed on one side is closed on the other.

Prints ``ready <host>:<port>`` on stdout once it listens; stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


async def _relay(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def serve(listen: tuple[str, int], upstreams: list[tuple[str, int]]) -> None:
    turn = itertools.count()

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        first = next(turn)
        for k in range(len(upstreams)):
            host, port = upstreams[(first + k) % len(upstreams)]
            try:
                up_r, up_w = await asyncio.wait_for(asyncio.open_connection(host, port), 5)
                break
            except (OSError, asyncio.TimeoutError):
                continue
        else:  # every node refused: the client sees its connection closed
            client_w.close()
            return
        await asyncio.gather(_relay(client_r, up_w), _relay(up_r, client_w))

    server = await asyncio.start_server(handle, *listen, reuse_address=True, backlog=256)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"ready {listen[0]}:{listen[1]}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", required=True, help="host:port to listen on")
    parser.add_argument("--to", required=True, help="comma-separated host:port upstreams")
    args = parser.parse_args()
    upstreams = [_address(part) for part in args.to.split(",") if part]
    asyncio.run(serve(_address(args.listen), upstreams))


if __name__ == "__main__":
    main()
