"""A Bumble peripheral to record (`cbtool record`, `cbtool spec-from-capture`) and replay.

Usage: python bumble_record_peripheral.py TRANSPORT NAME ADDRESS [MAX_MTU]

Advertises NAME with the Heart Rate and Battery services, manufacturer data in the scan
response, and serves:
  Heart Rate 180D: 2A37 Measurement (notify: 00 3C, 00 3D, 00 3E, 00 3F, one every 0.5 s from
                   each subscription), 2A38 Body Sensor Location (read: 01)
  Battery 180F:    2A19 Level (read + notify: 55)
  Device Information 180A: 2A29 Manufacturer "Bumble Labs", 2A24 Model "HR-1", 2A26 Firmware "1.2.3"
  6E400001-B5A3-F393-E0A9-E50E24DCCA9E (custom):
    ...0002 long value (read: 600 bytes, byte i = i*7 mod 256), user description "Long value"
    ...0003 read + write, "abc" until written
MAX_MTU (default 100) caps the ATT MTU, so that the long value takes a long read.
Prints ADVERTISING, then CONNECTED, SUBSCRIBED <uuid>, NOTIFIED <hex>, DISCONNECTED <reason>.
Runs until killed.
"""
import asyncio
import sys

from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Descriptor, Service
from bumble.transport import open_transport

BASE = "6E40{:04X}-B5A3-F393-E0A9-E50E24DCCA9E"
LONG_VALUE = bytes((i * 7) % 256 for i in range(600))
# The notification timing the round trip checks: four values, 0.5 s apart.
INTERVAL = 0.5


def say(*words):
    print(*words, flush=True)


async def main(transport_name, name, address, max_mtu):
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci(name, address, source, sink)
        device.gatt_server.max_mtu = max_mtu
        stored = {"value": b"abc"}

        def store(connection, value):
            stored["value"] = bytes(value)
            say("WROTE", BASE.format(3), value.hex())

        measurement = Characteristic("2A37", Characteristic.Properties.NOTIFY, 0, bytes([0, 60]))
        battery = Characteristic("2A19", Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
                                 Characteristic.READABLE, bytes([0x55]))
        long_value = Characteristic(BASE.format(2), Characteristic.Properties.READ, Characteristic.READABLE,
                                    CharacteristicValue(read=lambda connection: LONG_VALUE),
                                    descriptors=[Descriptor("2901", Descriptor.READABLE, b"Long value")])
        device.add_services([
            Service("180D", [
                measurement,
                Characteristic("2A38", Characteristic.Properties.READ, Characteristic.READABLE, bytes([1])),
            ]),
            Service("180F", [battery]),
            Service("180A", [
                Characteristic("2A29", Characteristic.Properties.READ, Characteristic.READABLE, b"Bumble Labs"),
                Characteristic("2A24", Characteristic.Properties.READ, Characteristic.READABLE, b"HR-1"),
                Characteristic("2A26", Characteristic.Properties.READ, Characteristic.READABLE, b"1.2.3"),
            ]),
            Service(BASE.format(1), [
                long_value,
                Characteristic(BASE.format(3), Characteristic.Properties.READ | Characteristic.Properties.WRITE,
                               Characteristic.READABLE | Characteristic.WRITEABLE,
                               CharacteristicValue(read=lambda connection: stored["value"], write=store)),
            ]),
        ])

        async def notify_measurements(connection):
            for i in range(4):
                value = bytes([0, 60 + i])
                await device.notify_subscriber(connection, measurement, value)
                say("NOTIFIED", value.hex())
                await asyncio.sleep(INTERVAL)

        def on_subscription(connection, characteristic, notify_enabled, indicate_enabled):
            if not (notify_enabled or indicate_enabled):
                return
            say("SUBSCRIBED", characteristic.uuid)
            if characteristic is measurement:
                asyncio.get_running_loop().create_task(notify_measurements(connection))

        device.on("characteristic_subscription", on_subscription)

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
        device.scan_response_data = bytes(AdvertisingData([
            (AdvertisingData.MANUFACTURER_SPECIFIC_DATA, bytes([0xFF, 0xFF, 0x52, 0x45, 0x43])),
        ]))
        await device.start_advertising(auto_restart=True)
        say("ADVERTISING")
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(arguments[0], arguments[1], arguments[2], int(arguments[3]) if len(arguments) > 3 else 100))
