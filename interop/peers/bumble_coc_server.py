"""A Bumble peripheral with an LE credit-based (CoC) echo server, for our central's L2CAP
connection-oriented channel interop tests.

Usage: python bumble_coc_server.py TRANSPORT [--name BumbleCoC] [--address F0:C0:C0:C0:C0:81]
           [--psm 0x0081] [--mtu 512] [--mps 64] [--credits 8] [--encrypt]

TRANSPORT as for every peer (e.g. tcp-client:127.0.0.1:PORT). Advertises NAME (connectable, from
the static random ADDRESS) and serves credit-based channels on PSM (decimal or 0x hex), opened
in the LE mode (0x14) or the enhanced one (0x17: Bumble answers both, one channel at a time). Its
own side of each channel: MTU (the largest SDU it accepts), MPS (the largest PDU it accepts: an
SDU above MPS - 2 must come segmented) and CREDITS (the credits it grants at the start and tops
up to, Bumble-style, once the peer has used half of them). Each SDU received is written back on
the same channel unchanged, one echo SDU per SDU (Bumble would split an echo above the peer's
MTU into several SDUs: keep the SDUs within both MTUs).

--encrypt: a channel is accepted only over an encrypted link. Bumble 0.0.236 has no security
setting for an LE CoC server (it accepts every request on a registered PSM), so this script checks
the link itself before Bumble sees a request (of either mode) and refuses with result 0x0005
(Insufficient Authentication) when it holds no key for the peer, 0x0008 (Insufficient Encryption)
when it has one (a bond) but the link is not encrypted. Pairing is always accepted: Just Works, LE Secure
Connections, bonding, keys in Bumble's in-memory keystore (a bond lasts as long as the process).

Prints READY <address> once advertising, then one line per event:
  CONNECTED <peer>, PAIRED <sc|legacy> <authenticated 0|1>, PAIRING-FAILED <reason>,
  ENCRYPTED <0|1>, REFUSED psm=0x.... result=0x.... (with --encrypt),
  OPENED psm=0x.... mtu=<peer's MTU> mps=<peer's MPS>, SDU <length> (each SDU received, before
  its echo is queued), CLOSED (a channel closed, by either side or with the link),
  DISCONNECTED <reason>; and for a peer's PDU above our MPS (Bumble would take it):
  PDU-TOO-LARGE <payload length> mps=<our MPS>.
Runs until killed.
"""
import argparse
import asyncio

from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.l2cap import (L2CAP_Credit_Based_Connection_Response, L2CAP_LE_Credit_Based_Connection_Response,
                          LeCreditBasedChannelSpec)
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

from bumble_pairing_peripheral import key_of

Result = L2CAP_LE_Credit_Based_Connection_Response.Result


def say(*words):
    print(*words, flush=True)


def just_works():
    """LE Secure Connections, no MITM, bonding, no input or output: Just Works on both sides."""
    return PairingConfig(
        sc=True, mitm=False, bonding=True,
        # Identity address: the static random address in use, not the controller's public one
        # (Bumble's default), so that a bond is found again by the address the peer sees.
        identity_address_type=PairingConfig.AddressType.RANDOM,
        delegate=PairingDelegate(io_capability=PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT))


def watch_link(connection):
    """The link-level lines both CoC peers print."""
    def on_pairing(keys):
        key = key_of(keys)
        say("PAIRED", "sc" if connection.sc else "legacy", int(bool(key and key.authenticated)))

    connection.on("pairing", on_pairing)
    connection.on("pairing_failure", lambda reason: say("PAIRING-FAILED", int(reason)))
    connection.on("connection_encryption_change", lambda: say("ENCRYPTED", int(connection.is_encrypted)))
    connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))


def require_encryption(device, psm):
    """Puts a check in front of Bumble's handlers of LE Credit Based (0x14) and Credit Based
    (enhanced, 0x17) Connection Requests (it looks each handler up by name on the channel
    manager for each signaling frame)."""
    manager = device.l2cap_channel_manager

    def guard(name, spsm_of, refuse):
        accept = getattr(manager, name)

        async def check(connection, cid, request):
            if spsm_of(request) != psm or connection.is_encrypted:
                return accept(connection, cid, request)
            keys = await device.keystore.get(str(connection.peer_address)) if device.keystore else None
            # The same result codes in both modes (Vol 3 Part A 4.23, 4.26).
            result = 0x0008 if keys is not None else 0x0005
            say("REFUSED", f"psm=0x{psm:04X}", f"result=0x{result:04X}")
            manager.send_control_frame(connection, cid, refuse(request, manager.le_coc_servers[psm], result))

        def on_request(connection, cid, request):
            if spsm_of(request) != psm or connection.is_encrypted:
                accept(connection, cid, request)
            else:  # the keystore lookup is asynchronous
                asyncio.get_running_loop().create_task(check(connection, cid, request))

        setattr(manager, name, on_request)

    guard("on_l2cap_le_credit_based_connection_request", lambda request: request.le_psm,
          lambda request, server, result: L2CAP_LE_Credit_Based_Connection_Response(
              identifier=request.identifier, destination_cid=0, mtu=server.mtu, mps=server.mps,
              initial_credits=0, result=Result(result)))
    guard("on_l2cap_credit_based_connection_request", lambda request: request.spsm,
          lambda request, server, result: L2CAP_Credit_Based_Connection_Response(
              identifier=request.identifier, destination_cid=[0] * len(request.source_cid),
              mtu=server.mtu, mps=server.mps, initial_credits=0,
              result=L2CAP_Credit_Based_Connection_Response.Result(result)))


def sdu_writer(channel):
    """A function that queues one SDU for the channel, keeping SDU boundaries. Bumble's
    channel.write is a byte stream: writes still queued (waiting for credits) when the next SDU
    is assembled are joined into one SDU, up to the peer's MTU. Here each SDU is written only once
    the previous one has been handed out whole (drain)."""
    queue = asyncio.Queue()

    async def send():
        while True:
            sdu = await queue.get()
            channel.write(sdu)
            await channel.drain()

    task = asyncio.get_running_loop().create_task(send())
    channel.on("close", task.cancel)
    return queue.put_nowait


def watch_pdus(channel):
    """A line for each of the peer's PDUs above our MPS, which Bumble takes without a check.
    (Credits cannot be checked this way: Bumble tops the peer's credits up as soon as half are
    used, at the latest as it counts the last one, so its count never shows a PDU beyond them.)"""
    receive = channel.on_pdu

    def on_pdu(pdu):
        if len(pdu) > channel.mps:
            say("PDU-TOO-LARGE", len(pdu), f"mps={channel.mps}")
        receive(pdu)

    channel.on_pdu = on_pdu


def on_channel(channel):
    say("OPENED", f"psm=0x{channel.psm:04X}", f"mtu={channel.peer_mtu}", f"mps={channel.peer_mps}")
    watch_pdus(channel)
    write = sdu_writer(channel)

    def echo(sdu):
        say("SDU", len(sdu))
        write(bytes(sdu))

    channel.sink = echo
    channel.on("close", lambda: say("CLOSED"))


async def main(options):
    async with await open_transport(options.transport) as (source, sink):
        device = Device.with_hci(options.name, options.address, source, sink)
        device.pairing_config_factory = lambda connection: just_works()
        device.create_l2cap_server(
            LeCreditBasedChannelSpec(psm=options.psm, mtu=options.mtu, mps=options.mps,
                                     max_credits=options.credits),
            handler=on_channel)
        if options.encrypt:
            require_encryption(device, options.psm)

        def on_connection(connection):
            say("CONNECTED", connection.peer_address)
            watch_link(connection)

        device.on("connection", on_connection)
        await device.power_on()
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, options.name.encode()),
        ]))
        await device.start_advertising(auto_restart=True)
        say("READY", device.random_address)
        await asyncio.get_running_loop().create_future()


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport")
    parser.add_argument("--name", default="BumbleCoC")
    parser.add_argument("--address", default="F0:C0:C0:C0:C0:81")
    parser.add_argument("--psm", type=lambda text: int(text, 0), default=0x0081)
    parser.add_argument("--mtu", type=int, default=512)
    parser.add_argument("--mps", type=int, default=64)
    parser.add_argument("--credits", type=int, default=8)
    parser.add_argument("--encrypt", action="store_true")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(arguments()))
