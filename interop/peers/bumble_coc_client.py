"""A Bumble central that opens an LE credit-based (CoC) channel and checks its echo, for our
peripheral's L2CAP connection-oriented channel interop tests.

Usage: python bumble_coc_client.py TRANSPORT [--name BumbleCoC] [--address F0:CE:CE:CE:CE:81]
           [--psm 0x0081] [--sizes 1,62,63,100,512] [--mtu N] [--mps 64] [--credits 8]
           [--pair] [--burst] [--expect-refused [CODE]] [--timeout 20]

TRANSPORT as for every peer (e.g. tcp-client:127.0.0.1:PORT). Scans until a device advertises NAME
as its complete local name, connects from the static random ADDRESS, pairs first with --pair (Just
Works, LE Secure Connections, bonding; in-memory keystore), then opens a channel to PSM (decimal or
0x hex) with its own MTU (default: the largest size, at least 512), MPS (default 64, so the echoes
come segmented) and CREDITS (granted at the start, topped up once half are used). Sends one SDU per
size, each of bytes (i * 7 + size) mod 256, and checks its echo byte for byte, one SDU at a time,
or with --burst all SDUs first (each as soon as the previous one is sent whole), then the echoes in
order. A size above the peer's MTU fails before anything is sent. Closes the channel, disconnects,
then prints DONE.

--expect-refused: the open must fail; prints REFUSED <result 0x....> and exits 0 (with CODE,
e.g. 0x0005, only if the result is that one; else FAILED).

Prints FOUND <address>, CONNECTED <peer>, PAIRED <sc|legacy> <authenticated 0|1> (with --pair),
ENCRYPTED <0|1>, OPENED mtu=<peer's MTU> mps=<peer's MPS>, ECHO <length> ok per SDU, CLOSED,
DISCONNECTED <reason>, DONE; exits 0. Also, as the server does: PDU-TOO-LARGE <length> mps=<ours>
(a peer's PDU above our MPS; the run goes on). On any failure: FAILED <why> (after disconnecting:
DONE or FAILED is always the last line) and exit code 1. Each wait is bounded by TIMEOUT seconds.
"""
import argparse
import asyncio
import logging
import sys

from bumble.device import Device
from bumble.l2cap import L2capError, LeCreditBasedChannelSpec
from bumble.transport import open_transport

from bumble_central import scan_for
from bumble_coc_server import just_works, say, sdu_writer, watch_link, watch_pdus


# Bumble logs a refused open with its traceback before raising it; REFUSED says it already.
logging.getLogger("bumble.l2cap").addFilter(lambda record: record.getMessage() != "connection failed")


class Failure(Exception):
    pass


def payload(size):
    return bytes((index * 7 + size) % 256 for index in range(size))


async def within(timeout, what, awaitable):
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise Failure(f"timeout {what}") from None


async def run(options, device):
    target = await within(options.timeout, "scanning", scan_for(device, options.name))
    say("FOUND", target)
    connection = await within(options.timeout, "connecting", device.connect(target))
    say("CONNECTED", connection.peer_address)
    watch_link(connection)
    if options.pair:
        try:
            await within(options.timeout, "pairing", connection.pair())
        except Failure:
            raise
        except Exception as error:
            raise Failure(f"pairing {type(error).__name__} {error}") from None

    spec = LeCreditBasedChannelSpec(psm=options.psm, mtu=options.mtu, mps=options.mps,
                                    max_credits=options.credits)
    try:
        channel = await within(options.timeout, "opening", connection.create_l2cap_channel(spec))
    except L2capError as error:
        code = f"0x{error.error_code:04X}"
        if options.expect_refused is None:
            raise Failure(f"refused {code} {error.error_name}") from None
        say("REFUSED", code)
        if options.expect_refused and int(options.expect_refused, 0) != error.error_code:
            raise Failure(f"refused {code}, not {options.expect_refused}") from None
        return connection
    if options.expect_refused is not None:
        raise Failure(f"opened mtu={channel.peer_mtu} mps={channel.peer_mps}, not refused")
    say("OPENED", f"mtu={channel.peer_mtu}", f"mps={channel.peer_mps}")

    watch_pdus(channel)
    echoes = asyncio.Queue()
    channel.sink = echoes.put_nowait
    channel.on("close", lambda: echoes.put_nowait(None))
    for size in options.sizes:
        if size > channel.peer_mtu:
            raise Failure(f"size {size} above the peer's MTU {channel.peer_mtu}")

    async def check(size):
        echo = await within(options.timeout, f"echo {size}", echoes.get())
        if echo is None:
            raise Failure(f"closed waiting for echo {size}")
        echo, sent = bytes(echo), payload(size)
        if echo != sent:
            first = next((i for i, (a, b) in enumerate(zip(echo, sent)) if a != b), min(len(echo), size))
            raise Failure(f"echo {size} differs: got {len(echo)} bytes, first difference at {first}")
        say("ECHO", size, "ok")

    write = sdu_writer(channel)
    if options.burst:
        for size in options.sizes:
            write(payload(size))
        for size in options.sizes:
            await check(size)
    else:
        for size in options.sizes:
            write(payload(size))
            await check(size)
    await within(options.timeout, "closing", channel.disconnect())
    say("CLOSED")
    return connection


async def main(options):
    async with await open_transport(options.transport) as (source, sink):
        device = Device.with_hci("BumbleCoCClient", options.address, source, sink)
        device.pairing_config_factory = lambda connection: just_works()
        await device.power_on()
        try:
            connection = await run(options, device)
            await within(options.timeout, "disconnecting", connection.disconnect())
        except Exception as error:
            for connection in list(device.connections.values()):  # leave the controllers reusable
                try:
                    await asyncio.wait_for(connection.disconnect(), 5)
                except Exception:
                    pass
            # The last line, as DONE is.
            say("FAILED", *([error] if isinstance(error, Failure)
                            else [type(error).__name__, str(error).replace("\n", " ")]))
            return 1
        say("DONE")
        return 0


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport")
    parser.add_argument("--name", default="BumbleCoC")
    parser.add_argument("--address", default="F0:CE:CE:CE:CE:81")
    parser.add_argument("--psm", type=lambda text: int(text, 0), default=0x0081)
    parser.add_argument("--sizes", type=lambda text: [int(size) for size in text.split(",")],
                        default=[1, 62, 63, 100, 512])
    parser.add_argument("--mtu", type=int)
    parser.add_argument("--mps", type=int, default=64)
    parser.add_argument("--credits", type=int, default=8)
    parser.add_argument("--pair", action="store_true")
    parser.add_argument("--burst", action="store_true")
    parser.add_argument("--expect-refused", nargs="?", const="", default=None, metavar="CODE")
    parser.add_argument("--timeout", type=float, default=20)
    options = parser.parse_args()
    if options.mtu is None:
        options.mtu = max(512, *options.sizes)
    return options


if __name__ == "__main__":
    sys.exit(asyncio.run(main(arguments())))
