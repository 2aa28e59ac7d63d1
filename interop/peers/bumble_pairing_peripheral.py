"""A Bumble GATT peripheral that pairs, for our central's pairing (SMP) interop tests.

Usage: python bumble_pairing_peripheral.py TRANSPORT NAME ADDRESS [sc=1] [mitm=1] [bonding=1] [io=noio]

sc, mitm, bonding: Bumble's PairingConfig (its defaults: LE Secure Connections, MITM wanted,
bonding). io: the pairing delegate's IO capability: noio, display, keyboard, yesno, kbdisplay.
Keys live in Bumble's in-memory keystore (the default): a bond lasts as long as the process.

Advertises NAME and serves service 6E420001-B5A3-F393-E0A9-E50E24DCCA9E:
  ...0002 open (read: "open")
  ...0003 encrypted (READ_REQUIRES_ENCRYPTION; read: "encrypted value")
  ...0004 authenticated (read: "mitm value") only over a link encrypted with a key from a
          MITM-protected pairing; else Insufficient Authentication (0x05). Bumble's own
          READ_REQUIRES_AUTHENTICATION is set too, but Bumble counts every encrypted LE link as
          authenticated (even Just Works), so this script checks the key itself.
Prints ADVERTISING, then one line per event:
  CONNECTED <peer>, PAIRING-START, PASSKEY <6 digits> (display), PAIRED <method> <authenticated 0|1>,
  PAIRING-FAILED <reason>, ENCRYPTED <0|1>, READ <uuid> (each value served), REFUSED <uuid> <code>,
  DISCONNECTED <reason>. Runs until killed.
"""
import asyncio
import sys

from bumble.att import ATT_Error, ErrorCode
from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

BASE = "6E42{:04X}-B5A3-F393-E0A9-E50E24DCCA9E"
IO = {
    "noio": PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
    "display": PairingDelegate.IoCapability.DISPLAY_OUTPUT_ONLY,
    "keyboard": PairingDelegate.IoCapability.KEYBOARD_INPUT_ONLY,
    "yesno": PairingDelegate.IoCapability.DISPLAY_OUTPUT_AND_YES_NO_INPUT,
    "kbdisplay": PairingDelegate.IoCapability.DISPLAY_OUTPUT_AND_KEYBOARD_INPUT,
}


def say(*words):
    print(*words, flush=True)


class Delegate(PairingDelegate):
    """Shows the passkey on stdout (the test types it on our side); accepts everything else."""

    async def display_number(self, number, digits):
        say("PASSKEY", f"{number:0{digits}d}")

    async def get_number(self):
        # A keyboard peer would need the number our side shows; no scenario asks for it.
        return None


def key_of(keys):
    """The long-term key Bumble kept from a pairing (LE SC: ltk; legacy: either role's)."""
    if keys is None:
        return None
    return keys.ltk or keys.ltk_peripheral or keys.ltk_central


async def main(transport_name, name, address, options):
    sc = options.get("sc", "1") == "1"
    mitm = options.get("mitm", "1") == "1"
    bonding = options.get("bonding", "1") == "1"
    io = IO[options.get("io", "noio")]
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci(name, address, source, sink)
        # Identity address: the static random address we connect with, not the controller's
        # public one (Bumble's default), so a bond is found again by the address in use.
        device.pairing_config_factory = lambda connection: PairingConfig(
            sc=sc, mitm=mitm, bonding=bonding,
            identity_address_type=PairingConfig.AddressType.RANDOM, delegate=Delegate(io_capability=io))

        def reader(uuid, value):
            def read(connection):
                say("READ", uuid)
                return value
            return read

        async def read_authenticated(connection):
            key = None
            if connection.is_encrypted and device.keystore is not None:
                key = key_of(await device.keystore.get(str(connection.peer_address)))
            if key is None or not key.authenticated:
                say("REFUSED", BASE.format(4), "05")
                raise ATT_Error(ErrorCode.INSUFFICIENT_AUTHENTICATION)
            say("READ", BASE.format(4))
            return b"mitm value"

        device.add_services([
            Service(BASE.format(1), [
                Characteristic(BASE.format(2), Characteristic.Properties.READ, Characteristic.READABLE,
                               CharacteristicValue(read=reader(BASE.format(2), b"open"))),
                Characteristic(BASE.format(3), Characteristic.Properties.READ,
                               Characteristic.READ_REQUIRES_ENCRYPTION,
                               CharacteristicValue(read=reader(BASE.format(3), b"encrypted value"))),
                Characteristic(BASE.format(4), Characteristic.Properties.READ,
                               Characteristic.READ_REQUIRES_AUTHENTICATION,
                               CharacteristicValue(read=read_authenticated)),
            ]),
        ])

        def on_connection(connection):
            say("CONNECTED", connection.peer_address)
            connection.on("pairing_start", lambda: say("PAIRING-START"))

            def on_pairing(keys):
                key = key_of(keys)
                say("PAIRED", "sc" if connection.sc else "legacy", int(bool(key and key.authenticated)))

            connection.on("pairing", on_pairing)
            connection.on("pairing_failure", lambda reason: say("PAIRING-FAILED", int(reason)))
            connection.on("connection_encryption_change", lambda: say("ENCRYPTED", int(connection.is_encrypted)))
            connection.on("connection_encryption_failure", lambda error: say("ENCRYPTION-FAILED", error))
            connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))

        device.on("connection", on_connection)
        await device.power_on()
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
        ]))
        await device.start_advertising(auto_restart=True)
        say("ADVERTISING")
        await asyncio.get_running_loop().create_future()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    settings = dict(option.split("=", 1) for option in arguments[3:])
    asyncio.run(main(arguments[0], arguments[1], arguments[2], settings))
