"""A Bumble GATT peripheral for our central's interop tests.

Usage: python bumble_gatt_peripheral.py TRANSPORT NAME ADDRESS [MAX_MTU]

Advertises NAME with the Heart Rate and Battery services and serves:
  Heart Rate 180D: 2A37 Measurement (notify: five values 60..64 once subscribed),
                   2A38 Body Sensor Location (read: 01), 2A39 Control Point (write)
  Battery 180F:    2A19 Level (read + notify: 64)
  Device Information 180A: 2A29 Manufacturer "Bumble Labs", 2A24 Model "HR-1"
  6E400001-B5A3-F393-E0A9-E50E24DCCA9E (custom):
    ...0002 long value (read: 600 bytes, byte i = i*7 mod 256)
    ...0003 writable (read + write: keeps what is written)
    ...0004 indicate (one indication 07 07 once subscribed)
    ...0005 write-only (Bumble sends no ATT response to a read of it: a peer quirk)
    ...0006 control (write "disconnect": the peripheral ends the connection)
MAX_MTU (default 517) caps the ATT MTU the server accepts, to make long reads and writes real.
Prints ADVERTISING, then one line per event: CONNECTED, WROTE <uuid> <hex>, SUBSCRIBED <uuid>,
DISCONNECTED <reason>. Runs until killed.
"""
import asyncio
import sys

from bumble.core import AdvertisingData, UUID
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.transport import open_transport

BASE = "6E40{:04X}-B5A3-F393-E0A9-E50E24DCCA9E"
LONG_VALUE = bytes((i * 7) % 256 for i in range(600))


def say(*words):
    print(*words, flush=True)


async def main(transport_name, name, address, max_mtu):
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci(name, address, source, sink)
        device.gatt_server.max_mtu = max_mtu
        stored = {"value": b""}

        def on_write(uuid):
            def write(connection, value):
                say("WROTE", uuid, value.hex())
                if uuid == BASE.format(6) and value == b"disconnect":
                    asyncio.get_running_loop().create_task(connection.disconnect())
            return write

        def store(connection, value):
            stored["value"] = bytes(value)
            say("WROTE", BASE.format(3), value.hex())

        measurement = Characteristic("2A37", Characteristic.Properties.NOTIFY, 0, bytes([0, 60]))
        battery = Characteristic("2A19", Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                 Characteristic.READABLE, bytes([100]))
        indicate = Characteristic(BASE.format(4), Characteristic.Properties.INDICATE, 0, bytes([0, 0]))
        device.add_services([
            Service("180D", [
                measurement,
                Characteristic("2A38", Characteristic.Properties.READ, Characteristic.READABLE, bytes([1])),
                Characteristic("2A39", Characteristic.Properties.WRITE, Characteristic.WRITEABLE,
                               CharacteristicValue(write=on_write("2A39"))),
            ]),
            Service("180F", [battery]),
            Service("180A", [
                Characteristic("2A29", Characteristic.Properties.READ, Characteristic.READABLE, b"Bumble Labs"),
                Characteristic("2A24", Characteristic.Properties.READ, Characteristic.READABLE, b"HR-1"),
            ]),
            Service(BASE.format(1), [
                Characteristic(BASE.format(2), Characteristic.Properties.READ, Characteristic.READABLE,
                               CharacteristicValue(read=lambda connection: LONG_VALUE)),
                Characteristic(BASE.format(3), Characteristic.Properties.READ | Characteristic.Properties.WRITE,
                               Characteristic.READABLE | Characteristic.WRITEABLE,
                               CharacteristicValue(read=lambda connection: stored["value"], write=store)),
                indicate,
                Characteristic(BASE.format(5), Characteristic.Properties.WRITE, Characteristic.WRITEABLE,
                               CharacteristicValue(write=on_write(BASE.format(5)))),
                Characteristic(BASE.format(6), Characteristic.Properties.WRITE, Characteristic.WRITEABLE,
                               CharacteristicValue(write=on_write(BASE.format(6)))),
            ]),
        ])

        async def on_subscription(connection, characteristic, notify_enabled, indicate_enabled):
            if not (notify_enabled or indicate_enabled):
                return
            say("SUBSCRIBED", characteristic.uuid)
            if characteristic is measurement:
                for bpm in range(60, 65):
                    await device.notify_subscriber(connection, measurement, bytes([0, bpm]))
            elif characteristic is indicate:
                await device.indicate_subscriber(connection, indicate, bytes([7, 7]))

        device.on("characteristic_subscription",
                  lambda *args: asyncio.get_running_loop().create_task(on_subscription(*args)))

        def on_connection(connection):
            say("CONNECTED", connection.peer_address)
            connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))

        device.on("connection", on_connection)
        await device.power_on()
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
            (AdvertisingData.COMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS, bytes([0x0D, 0x18, 0x0F, 0x18])),
        ]))
        await device.start_advertising(auto_restart=True)
        say("ADVERTISING")
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(arguments[0], arguments[1], arguments[2], int(arguments[3]) if len(arguments) > 3 else 517))
