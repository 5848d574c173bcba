#!/usr/bin/env python3
"""A TCP proxy that can delay a link: the chaos runs' latency fault.

    delay_proxy.py LISTEN_HOST TARGET_HOST TARGET_PORT FLAG_FILE DELAY_SECONDS

Listens on LISTEN_HOST (a free port, printed on the first line of standard
output) and forwards every connection to TARGET_HOST:TARGET_PORT. While
FLAG_FILE exists, each chunk read in either direction is held DELAY_SECONDS
before it is written on; the order of a direction's bytes never changes (a
chunk is never written before the one read before it), so removing the flag
lets the held chunks out at their time and the later ones right after.
This kernel has no netem: the proxy is the tests' own way to slow a link.
Runs until killed.
"""
import asyncio
import os
import sys


async def pump(reader, writer, flag, delay):
    """Copies reader to writer, each chunk held `delay` while `flag` exists."""
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def write_out():
        while True:
            release, chunk = await queue.get()
            if chunk is None:
                break
            wait = release - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()

    sender = asyncio.create_task(write_out())
    last = 0.0
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            release = loop.time() + (delay if os.path.exists(flag) else 0.0)
            last = max(last, release)  # never before an earlier chunk
            queue.put_nowait((last, chunk))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((last, None))
    try:
        await sender
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def serve(client_reader, client_writer, target, flag, delay):
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.close()
        return
    try:
        await asyncio.gather(pump(client_reader, server_writer, flag, delay),
                             pump(server_reader, client_writer, flag, delay))
    finally:
        for writer in (client_writer, server_writer):
            writer.close()


async def main():
    if len(sys.argv) != 6:
        sys.exit("usage: delay_proxy.py LISTEN_HOST TARGET_HOST TARGET_PORT FLAG_FILE DELAY_SECONDS")
    listen_host, target_host, target_port, flag, delay = sys.argv[1:]
    target = (target_host, int(target_port))
    server = await asyncio.start_server(
        lambda r, w: serve(r, w, target, flag, float(delay)), listen_host, 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
