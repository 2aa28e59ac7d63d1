"""Bumble's own host on its own virtual link: the comparison figures for cbbench.

Usage: python bumble_bench.py [--notifications N] [--reads N]
       python bumble_bench.py --channel-bytes N
Two Bumble devices (host + controller each) on one bumble.link.LocalLink in this process.
The peripheral has one characteristic (read + notify). The central connects, discovers it and
subscribes; then
  - notify: the peripheral sends N 20-byte notifications back to back; the rate is N over the
    CPU time of this process from the first send to the last arrival at the central's
    subscriber (cbbench counts CPU time too; Bumble is single-threaded, so on an idle machine
    the wall-clock rate, also printed, is the same);
  - read: the central reads the characteristic N times, one after another; each round trip is
    timed from the call to its result.
Prints one JSON object: bumble_notify_20B_per_s, bumble_notify_20B_per_s_wall,
bumble_read_rtt_median_us, bumble_read_rtt_p99_us.
With --channel-bytes N, instead: an LE credit-based channel (CoC) from the central to the
peripheral with our stack's parameters on both sides (MTU 4096, MPS 247, 64 credits topped up at
half), and each controller's LE ACL buffers 251 bytes long, so that one K-frame is one ACL packet
as on our 251-byte links. The central writes N bytes in 4096-byte writes (one SDU each), waiting
for the channel to drain after every 16 (a 64 KiB send buffer); the peripheral's sink counts the
bytes. The rate is N over the CPU time of this process from the first write to the last byte's
arrival. Prints one JSON object: bumble_channel_bytes_per_s, bumble_channel_bytes_per_s_wall.
Logging and snooping stay off: they slow Bumble 1.5-3x.
"""
import argparse
import asyncio
import json
import statistics
import time

from bumble.controller import Controller
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.hci import Address
from bumble.host import Host
from bumble.l2cap import LeCreditBasedChannelSpec
from bumble.link import LocalLink
from bumble.transport.common import AsyncPipeSink

SERVICE = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
VALUE = "6E400003-B5A3-F393-E0A9-E50E24DCCA9E"


def make_device(link, name, address, acl_length=None):
    controller = Controller(name, link=link, public_address=address)
    if acl_length is not None:
        controller.le_acl_data_packet_length = acl_length
    return Device(name=name, address=Address(address), host=Host(controller, AsyncPipeSink(controller)))


async def main(notifications, reads):
    link = LocalLink()
    central = make_device(link, "central", "F0:F0:F0:F0:F0:01")
    peripheral = make_device(link, "peripheral", "F0:F0:F0:F0:F0:02")
    characteristic = Characteristic(
        VALUE,
        Characteristic.Properties.READ | Characteristic.Properties.NOTIFY,
        Characteristic.READABLE,
        CharacteristicValue(read=lambda connection: bytes(20)),
    )
    peripheral.add_service(Service(SERVICE, [characteristic]))
    await central.power_on()
    await peripheral.power_on()

    connected = asyncio.get_running_loop().create_future()
    peripheral.once("connection", connected.set_result)
    await peripheral.start_advertising(advertising_interval_min=20)
    connection = await central.connect(Address("F0:F0:F0:F0:F0:02"))
    peripheral_connection = await connected
    peer = Peer(connection)
    await peer.request_mtu(247)
    await peer.discover_services()
    proxy = (await peer.discover_characteristics(uuids=[VALUE]))[0]

    received = 0
    done = asyncio.get_running_loop().create_future()
    last_arrival = [0.0, 0.0]

    def on_value(_value):
        nonlocal received
        received += 1
        if received == notifications:
            last_arrival[0] = time.perf_counter()
            last_arrival[1] = time.process_time()
            done.set_result(None)

    await peer.subscribe(proxy, on_value)
    payload = bytes(range(20))
    start = time.perf_counter()
    start_cpu = time.process_time()
    for _ in range(notifications):
        await peripheral.notify_subscriber(peripheral_connection, characteristic, payload)
    await asyncio.wait_for(done, 120)
    notify_rate_wall = notifications / (last_arrival[0] - start)
    notify_rate = notifications / (last_arrival[1] - start_cpu)

    rtts = []
    for _ in range(reads):
        t0 = time.perf_counter()
        await peer.read_value(proxy)
        rtts.append((time.perf_counter() - t0) * 1e6)
    rtts.sort()
    p99 = rtts[min(len(rtts) - 1, int(len(rtts) * 0.99))]
    print(json.dumps({
        "bumble_notify_20B_per_s": round(notify_rate, 1),
        "bumble_notify_20B_per_s_wall": round(notify_rate_wall, 1),
        "bumble_read_rtt_median_us": round(statistics.median(rtts), 1),
        "bumble_read_rtt_p99_us": round(p99, 1),
    }), flush=True)


CHANNEL_PSM = 0x0080
CHANNEL_SPEC = dict(psm=CHANNEL_PSM, mtu=4096, mps=247, max_credits=64)
CHANNEL_WRITE = 4096
CHANNEL_WRITES_PER_DRAIN = 16


async def channel(total):
    link = LocalLink()
    central = make_device(link, "central", "F0:F0:F0:F0:F0:01", acl_length=251)
    peripheral = make_device(link, "peripheral", "F0:F0:F0:F0:F0:02", acl_length=251)
    received = 0
    done = asyncio.get_running_loop().create_future()
    last_arrival = [0.0, 0.0]

    def on_sdu(sdu):
        nonlocal received
        received += len(sdu)
        if received >= total and not done.done():
            last_arrival[0] = time.perf_counter()
            last_arrival[1] = time.process_time()
            done.set_result(None)

    def on_channel(incoming):
        incoming.sink = on_sdu

    peripheral.create_l2cap_server(LeCreditBasedChannelSpec(**CHANNEL_SPEC), handler=on_channel)
    await central.power_on()
    await peripheral.power_on()
    await peripheral.start_advertising(advertising_interval_min=20)
    connection = await central.connect(Address("F0:F0:F0:F0:F0:02"))
    outgoing = await connection.create_l2cap_channel(LeCreditBasedChannelSpec(**CHANNEL_SPEC))
    chunk = bytes(i * 7 % 256 for i in range(CHANNEL_WRITE))

    start = time.perf_counter()
    start_cpu = time.process_time()
    sent = 0
    writes = 0
    while sent < total:
        size = min(CHANNEL_WRITE, total - sent)
        outgoing.write(chunk if size == CHANNEL_WRITE else chunk[:size])
        sent += size
        writes += 1
        if writes % CHANNEL_WRITES_PER_DRAIN == 0:
            await outgoing.drain()
    await asyncio.wait_for(done, 600)
    if received != total:
        raise SystemExit(f"channel: received {received} of {total} bytes")
    print(json.dumps({
        "bumble_channel_bytes_per_s": round(total / (last_arrival[1] - start_cpu), 1),
        "bumble_channel_bytes_per_s_wall": round(total / (last_arrival[0] - start), 1),
    }), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--notifications", type=int, default=20000)
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--channel-bytes", type=int, default=0,
                        help="measure an LE CoC instead: this many bytes, central to peripheral")
    arguments = parser.parse_args()
    if arguments.channel_bytes > 0:
        asyncio.run(channel(arguments.channel_bytes))
    else:
        asyncio.run(main(arguments.notifications, arguments.reads))
