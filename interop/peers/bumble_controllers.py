"""Linked Bumble virtual controllers, each served as H4 over TCP on its own port.

Usage: python bumble_controllers.py PORT [PORT ...]
Each controller gets a distinct public address (the stock app gives all of them
00:00:00:00:00:00, and Bumble's link routes by address). Prints "READY" once every
port listens, then runs until killed. An independent controller for our host's tests.
"""
import asyncio
import sys

from bumble.controller import Controller
from bumble.link import LocalLink
from bumble.transport import open_transport


async def main(ports):
    link = LocalLink()
    transports = []
    for index, port in enumerate(ports):
        transport = await open_transport(f"tcp-server:127.0.0.1:{port}")
        transports.append(transport)
        Controller(
            f"C{index}",
            host_source=transport.source,
            host_sink=transport.sink,
            link=link,
            public_address=f"B0:00:00:00:00:{index + 1:02X}",
        )
    print("READY", flush=True)
    await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    asyncio.run(main([int(p) for p in sys.argv[1:]]))
