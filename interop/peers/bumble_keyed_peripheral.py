"""A Bumble peripheral that holds a long-term key given by the test (no pairing).

Usage: python bumble_keyed_peripheral.py TRANSPORT NAME ADDRESS LTK_HEX

Advertises NAME; answers the controller's LE Long Term Key Request with LTK_HEX (16 bytes,
as HCI carries it) whatever EDIV/Rand the central uses. Prints ADVERTISING, then CONNECTED,
PHY <tx> <rx>, ENCRYPTED <0|1> and DISCONNECTED <reason> as they happen. Runs until killed.
"""
import asyncio
import sys

from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.transport import open_transport


def say(*words):
    print(*words, flush=True)


async def main(transport_name, name, address, key_hex):
    key = bytes.fromhex(key_hex)
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci(name, address, source, sink)

        async def provide_key(handle, rand, ediv):
            return key

        def on_connection(connection):
            say("CONNECTED", connection.peer_address)
            connection.on("connection_phy_update", lambda phy: say("PHY", phy.tx_phy, phy.rx_phy))
            connection.on("connection_encryption_change", lambda: say("ENCRYPTED", int(connection.is_encrypted)))
            connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))

        device.on("connection", on_connection)
        await device.power_on()
        # After power_on: the device installs its own provider there.
        device.host.long_term_key_provider = provide_key
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
        ]))
        await device.start_advertising(auto_restart=True)
        say("ADVERTISING")
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
