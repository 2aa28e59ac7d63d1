"""A Bumble host that scans through the controller at TRANSPORT and prints what it finds.

Usage: python bumble_scanner.py TRANSPORT SECONDS
Prints "FOUND <address> <name>" for each advertisement with a local name, then "DONE".
Used to drive our virtual controller from an independent host.
"""
import asyncio
import sys

from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.transport import open_transport


async def main(transport_name, seconds):
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci("BumbleScanner", "F0:00:00:00:00:01", source, sink)

        def on_advertisement(advertisement):
            name = advertisement.data.get(AdvertisingData.COMPLETE_LOCAL_NAME)
            if name is not None:
                if isinstance(name, bytes):
                    name = name.decode(errors="replace")
                print(f"FOUND {advertisement.address} {name}", flush=True)

        device.on("advertisement", on_advertisement)
        await device.power_on()
        await device.start_scanning(filter_duplicates=True)
        await asyncio.sleep(seconds)
        await device.stop_scanning()
        print("DONE", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
