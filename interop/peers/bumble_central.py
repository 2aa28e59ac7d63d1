"""A Bumble GATT central driven line by line from standard input, for interop tests.

Usage: python bumble_central.py TRANSPORT ADDRESS [MTU]
ADDRESS is "AA:BB:CC:DD:EE:FF" (public), "AA:BB:CC:DD:EE:FF/R" (random), or "name=NAME": scan
until an advertisement with that complete local name, print FOUND <address> (as Bumble formats
it, "/P" for public) and connect to the device that sent it. Connects, exchanges
the MTU (default 517), discovers the whole database and prints it:
  SERVICE <uuid> <start> <end>
  CHARACTERISTIC <uuid> <value handle> <properties hex>
  DESCRIPTOR <uuid> <handle>
then READY, and answers each command line with one result line:
  read UUID                    → READ UUID HEX | ERROR read UUID CODE
  write UUID HEX               → WROTE UUID | ERROR write UUID CODE      (Write Request, or a
                                  long write when the value does not fit)
  write-command UUID HEX       → SENT UUID
  subscribe UUID               → SUBSCRIBED UUID; then each value as VALUE UUID HEX
  rediscover                   → the database again, then READY
  disconnect                   → DISCONNECTED
A Service Changed indication prints SERVICE-CHANGED START END. UUIDs are printed as Bumble
formats them (16-bit ones as 4 hex digits, others in full, upper case). Error codes are hex.
"""
import asyncio
import sys

from bumble.att import ATT_Error
from bumble.core import AdvertisingData
from bumble.device import Device, Peer
from bumble.hci import Address
from bumble.transport import open_transport


def say(*words):
    print(*words, flush=True)


def uuid_text(uuid):
    return uuid.to_hex_str(separator="-")


async def dump(peer):
    await peer.discover_services()
    for service in peer.services:
        say("SERVICE", uuid_text(service.uuid), service.handle, service.end_group_handle)
        await service.discover_characteristics()
        for characteristic in service.characteristics:
            say("CHARACTERISTIC", uuid_text(characteristic.uuid), characteristic.handle,
                format(int(characteristic.properties), "02x"))
            await characteristic.discover_descriptors()
            for descriptor in characteristic.descriptors:
                say("DESCRIPTOR", uuid_text(descriptor.type), descriptor.handle)
    say("READY")


def find(peer, uuid):
    for service in peer.services:
        for characteristic in service.characteristics:
            if uuid_text(characteristic.uuid) == uuid.upper():
                return characteristic
    raise KeyError(uuid)


async def scan_for(device, name):
    """Scans until a device advertises NAME as its complete local name; its address."""
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement):
        advertised = advertisement.data.get(AdvertisingData.COMPLETE_LOCAL_NAME)
        if isinstance(advertised, bytes):
            advertised = advertised.decode(errors="replace")
        if advertised == name and not found.done():
            found.set_result(advertisement.address)

    device.on("advertisement", on_advertisement)
    await device.start_scanning(filter_duplicates=True)
    target = await found
    device.remove_listener("advertisement", on_advertisement)
    await device.stop_scanning()
    return target


async def main(transport_name, address, mtu):
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci("BumbleCentral", "F0:CE:CE:CE:CE:01", source, sink)
        await device.power_on()
        if address.startswith("name="):
            target = await scan_for(device, address[len("name="):])
            say("FOUND", target)
        else:
            text, _, kind = address.partition("/")
            target = Address(text, Address.RANDOM_DEVICE_ADDRESS if kind == "R" else Address.PUBLIC_DEVICE_ADDRESS)
        connection = await device.connect(target)
        connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))
        peer = Peer(connection)
        say("MTU", await peer.request_mtu(mtu))

        def on_service_changed(value):
            say("SERVICE-CHANGED", int.from_bytes(value[0:2], "little"), int.from_bytes(value[2:4], "little"))

        await dump(peer)
        changed = [c for s in peer.services for c in s.characteristics if uuid_text(c.uuid) == "2A05"]
        if changed:
            await peer.subscribe(changed[0], on_service_changed, prefer_notify=False)

        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := (await reader.readline()).decode().strip():
            words = line.split()
            command, arguments = words[0], words[1:]
            try:
                if command == "read":
                    value = await find(peer, arguments[0]).read_value()
                    say("READ", arguments[0].upper(), bytes(value).hex())
                elif command == "write":
                    await find(peer, arguments[0]).write_value(bytes.fromhex(arguments[1]), with_response=True)
                    say("WROTE", arguments[0].upper())
                elif command == "write-command":
                    await find(peer, arguments[0]).write_value(bytes.fromhex(arguments[1]), with_response=False)
                    say("SENT", arguments[0].upper())
                elif command == "subscribe":
                    uuid = arguments[0].upper()
                    await peer.subscribe(find(peer, uuid), lambda value, uuid=uuid: say("VALUE", uuid, bytes(value).hex()))
                    say("SUBSCRIBED", uuid)
                elif command == "rediscover":
                    await dump(peer)
                elif command == "disconnect":
                    await connection.disconnect()
                else:
                    say("UNKNOWN", command)
            except ATT_Error as error:
                say("ERROR", command, arguments[0].upper() if arguments else "-", format(error.error_code, "02x"))
            except KeyError as error:
                say("ERROR", command, "unknown", str(error))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(main(arguments[0], arguments[1], int(arguments[2]) if len(arguments) > 2 else 517))
