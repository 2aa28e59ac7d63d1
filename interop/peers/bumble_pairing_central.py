"""A Bumble GATT central that pairs, driven line by line from standard input, for the pairing
(SMP) interop tests.

Usage: python bumble_pairing_central.py TRANSPORT ADDRESS [sc=1] [mitm=1] [bonding=1] [io=noio]
ADDRESS as in bumble_central.py ("AA:BB:CC:DD:EE:FF", ".../R" for random, or "name=NAME").
sc, mitm, bonding, io: the PairingConfig and its delegate's IO capability (noio, display,
keyboard, yesno, kbdisplay); keys stay in Bumble's in-memory keystore.

Connects, prints CONNECTED, exchanges the MTU, prints the database as bumble_central.py does,
then READY, and answers each command line:
  read UUID     → READ UUID HEX | ERROR read UUID CODE (hex)
  pair          → PAIRED <sc|legacy> <authenticated 0|1> | PAIRING-FAILED <reason>  (in the
                  background: the passkey command may come while it runs)
  passkey N     → answers the pending PASSKEY-REQUEST
  encrypt       → ENCRYPTED 1 | ERROR encrypt <why>  (with the bond's key)
  disconnect    → DISCONNECTED <reason>
  connect       → CONNECTED …, the database, READY again (same peer)
  keys          → KEYS <number of peers in the keystore>
Also printed as they happen: PAIRING-START, PASSKEY <digits> (when displaying), ENCRYPTED <0|1>.
"""
import asyncio
import sys

from bumble.att import ATT_Error
from bumble.device import Device, Peer
from bumble.hci import Address
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

from bumble_central import dump, find, say, scan_for
from bumble_pairing_peripheral import IO, key_of


class Delegate(PairingDelegate):
    """Passkeys come from the command line (the test reads ours from our agent or log)."""

    def __init__(self, io_capability):
        super().__init__(io_capability=io_capability)
        self.pending = None

    async def get_number(self):
        self.pending = asyncio.get_running_loop().create_future()
        say("PASSKEY-REQUEST")
        return await self.pending

    async def display_number(self, number, digits):
        say("PASSKEY", f"{number:0{digits}d}")


async def main(transport_name, address, options):
    sc = options.get("sc", "1") == "1"
    mitm = options.get("mitm", "1") == "1"
    bonding = options.get("bonding", "1") == "1"
    delegate = Delegate(IO[options.get("io", "noio")])
    async with await open_transport(transport_name) as (source, sink):
        device = Device.with_hci("BumblePairingCentral", "F0:CE:CE:CE:CE:02", source, sink)
        # Identity address: the static random address we connect with, not the controller's
        # public one (Bumble's default), so a bond is found again by the address in use.
        device.pairing_config_factory = lambda connection: PairingConfig(
            sc=sc, mitm=mitm, bonding=bonding,
            identity_address_type=PairingConfig.AddressType.RANDOM, delegate=delegate)
        await device.power_on()
        if address.startswith("name="):
            target = await scan_for(device, address[len("name="):])
            say("FOUND", target)
        else:
            text, _, kind = address.partition("/")
            target = Address(text, Address.RANDOM_DEVICE_ADDRESS if kind == "R" else Address.PUBLIC_DEVICE_ADDRESS)

        async def connect():
            connection = await device.connect(target)
            say("CONNECTED", connection.peer_address)
            connection.on("pairing_start", lambda: say("PAIRING-START"))

            def on_pairing(keys):
                key = key_of(keys)
                say("PAIRED", "sc" if connection.sc else "legacy", int(bool(key and key.authenticated)))

            connection.on("pairing", on_pairing)
            connection.on("pairing_failure", lambda reason: say("PAIRING-FAILED", int(reason)))
            connection.on("connection_encryption_change", lambda: say("ENCRYPTED", int(connection.is_encrypted)))
            connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))
            peer = Peer(connection)
            say("MTU", await peer.request_mtu(517))
            await dump(peer)
            return connection, peer

        async def pair(connection):
            try:
                await connection.pair()
            except Exception as error:  # the failure event says why; this keeps the loop alive
                say("PAIR-ERROR", type(error).__name__)

        connection, peer = await connect()
        tasks = set()
        reader = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while line := (await reader.readline()).decode().strip():
            words = line.split()
            command, arguments = words[0], words[1:]
            try:
                if command == "read":
                    value = await find(peer, arguments[0]).read_value()
                    say("READ", arguments[0].upper(), bytes(value).hex())
                elif command == "pair":
                    task = asyncio.get_running_loop().create_task(pair(connection))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                elif command == "passkey":
                    if delegate.pending is not None and not delegate.pending.done():
                        delegate.pending.set_result(int(arguments[0]))
                elif command == "encrypt":
                    await connection.encrypt()
                elif command == "disconnect":
                    await connection.disconnect()
                elif command == "connect":
                    connection, peer = await connect()
                elif command == "keys":
                    say("KEYS", len(await device.keystore.get_all()))
                else:
                    say("UNKNOWN", command)
            except ATT_Error as error:
                say("ERROR", command, arguments[0].upper() if arguments else "-", format(error.error_code, "02x"))
            except (Exception, asyncio.CancelledError) as error:  # cancelled: the link went down
                say("ERROR", command, type(error).__name__, str(error).replace("\n", " "))


if __name__ == "__main__":
    arguments = sys.argv[1:]
    settings = dict(option.split("=", 1) for option in arguments[2:])
    asyncio.run(main(arguments[0], arguments[1], settings))
