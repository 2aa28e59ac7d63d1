"""A Bumble host that advertises a name through the controller at TRANSPORT.

Usage: python bumble_advertiser.py TRANSPORT NAME ADDRESS
Prints "ADVERTISING" once it advertises, then runs until killed.
"""
import asyncio
import sys

from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.transport import open_transport


async def main(transport_name, name, address):
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci(name, address, source, sink)
        await device.power_on()
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
        ]))
        await device.start_advertising()
        print("ADVERTISING", flush=True)
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
