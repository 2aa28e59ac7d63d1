"""A hostile Bumble peer, as peripheral or as central, for issue 17's hostile-peer tests.

Usage: python hostile_peer.py peripheral PORT NAME [ARMED ...]
       python hostile_peer.py central PORT

One process: two linked Bumble controllers, one served as H4 on tcp-server 127.0.0.1:PORT
for our stack, the other driving a Bumble host here. The host misbehaves on the fixed
channels (ATT 0x0004, LE signalling 0x0005, SMP 0x0006) by writing raw L2CAP PDUs with
`Device.send_l2cap_pdu`; every PDU our stack sends on those channels is seen first here
(Bumble's L2CAP manager's `on_pdu` is wrapped) and may be answered by a scenario instead
of by Bumble.

peripheral: advertises NAME with a GATT service 6E430001-…: 0002 read "hello",
  0003 read (40 bytes), 0004 notify + indicate, 0005 read with encryption required.
  ARMED names hooks set from the start (the MTU exchange happens at connection). Standard
  input, one command per line:
    arm HOOK       answer our next matching requests badly (prints ARMED HOOK); "arm disarm"
                   removes every hook and prints what they saw
    push SCENARIO  send a burst of bad PDUs, print what came back, then DONE SCENARIO
central: prints LISTENING, waits for the line "connect ADDRESS" ("AA:BB:…/R" random, else
  public; our stack's controller is up only once the peer listens), connects, discovers our
  database with Bumble's client, prints READY, then per line:
    run SCENARIO [PSM]  misbehave, print what came back, then DONE SCENARIO
    check               a raw Read Request of …0002: READ-OK HEX or READ-FAILED HEX
Lines it prints: ATT/SIG/SMP <hex> for each PDU our stack sent during a scenario, and a
scenario's own facts (CONFIRMATIONS n, PREPARED ok=n full=m, ...). Runs until killed.
"""
import asyncio
import struct
import sys

from bumble.controller import Controller
from bumble.core import AdvertisingData
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.hci import Address
from bumble.link import LocalLink
from bumble.transport import open_transport
from bumble.transport.common import AsyncPipeSink

ATT, SIG, SMP = 0x0004, 0x0005, 0x0006
NAMES = {ATT: "ATT", SIG: "SIG", SMP: "SMP"}
BASE = "6E43{:04X}-B5A3-F393-E0A9-E50E24DCCA9E"


def say(*words):
    print(*words, flush=True)


def u16(value):
    return struct.pack("<H", value)


class Wire:
    """Sees every PDU our stack sends on the fixed channels before Bumble does."""

    def __init__(self, device):
        self.device = device
        manager = device.l2cap_channel_manager
        self.original = manager.on_pdu
        manager.on_pdu = self.on_pdu
        self.connection = None
        self.received = []  # (cid, bytes), in order
        self.owned = set()  # channels a scenario owns: Bumble never sees their PDUs
        self.hooks = []  # functions (cid, pdu) -> True when they answered it
        self.changed = asyncio.Event()

    def on_pdu(self, connection, cid, pdu):
        pdu = bytes(pdu)
        self.received.append((cid, pdu))
        self.changed.set()
        for hook in list(self.hooks):
            if hook(cid, pdu):
                return
        if cid in self.owned:
            return
        self.original(connection, cid, pdu)

    def send(self, cid, pdu):
        self.device.send_l2cap_pdu(self.connection.handle, cid, bytes(pdu))

    def mark(self):
        return len(self.received)

    def since(self, mark, cid=None):
        return [(c, p) for c, p in self.received[mark:] if cid is None or c == cid]

    async def wait(self, mark, predicate, timeout=3.0):
        """Waits until a PDU received after `mark` satisfies predicate(cid, pdu); it or None."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            for cid, pdu in self.received[mark:]:
                if predicate(cid, pdu):
                    return pdu
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                return None

    def report(self, mark, cids=(ATT, SIG, SMP)):
        for cid, pdu in self.received[mark:]:
            if cid in cids:
                say(NAMES.get(cid, f"CID{cid:04X}"), pdu.hex())


async def start(port, name, address):
    """The linked controllers (ours on PORT) and a Bumble device on the other one."""
    link = LocalLink()
    served = await open_transport(f"tcp-server:127.0.0.1:{port}")
    Controller("ours", host_source=served.source, host_sink=served.sink, link=link,
               public_address="B0:00:00:00:17:01")
    controller = Controller("peer", link=link, public_address="B0:00:00:00:17:02")
    return Device.with_hci(name, address, controller, AsyncPipeSink(controller))


# ---------------------------------------------------------------------------------------
# Peripheral: our central's client against a server that answers badly.

LONG = bytes(range(40))


async def peripheral(port, name, armed):
    device = await start(port, name, "F0:17:17:17:17:01")
    wire = Wire(device)
    notify = Characteristic(BASE.format(4), Characteristic.Properties.NOTIFY | Characteristic.Properties.INDICATE,
                            0, bytes([0]))
    hello = Characteristic(BASE.format(2), Characteristic.Properties.READ, Characteristic.READABLE, b"hello")
    long = Characteristic(BASE.format(3), Characteristic.Properties.READ, Characteristic.READABLE,
                          CharacteristicValue(read=lambda connection: LONG))
    protected = Characteristic(BASE.format(5), Characteristic.Properties.READ, Characteristic.READ_REQUIRES_ENCRYPTION,
                               b"secret")
    service = Service(BASE.format(1), [hello, long, notify, protected])
    device.add_services([service])
    counts = {"blobs": 0}

    def mtu():
        return wire.connection.att_mtu if wire.connection else 23

    def ours(pdu):
        """Whether a request's range starts in our service (not the GAP or GATT service, which
        our stack reads by itself after connecting), or, for Find By Type Value, it is about
        our 128-bit service UUID."""
        if pdu[0] == 0x02:
            return True
        if pdu[0] == 0x06:
            return len(pdu) == 7 + 16
        start = pdu[1] | pdu[2] << 8 if len(pdu) >= 3 else 0
        return service.handle <= start <= service.end_group_handle

    def once(opcode, answer):
        """Answers our next request `opcode` about our service with `answer()` instead of Bumble."""
        def hook(cid, pdu):
            if cid != ATT or pdu[0] != opcode or not ours(pdu):
                return False
            wire.hooks.remove(hook)
            say("HOOKED", pdu.hex())
            wire.send(ATT, answer(pdu))
            return True
        wire.hooks.append(hook)

    def arm(hook):
        if hook == "tiny-mtu":
            # Server Rx MTU 5: below the LE minimum of 23.
            once(0x02, lambda pdu: b"\x03" + u16(5))
        elif hook == "huge-mtu":
            once(0x02, lambda pdu: b"\x03" + u16(0xFFFF))
        elif hook == "wrong-opcode-discovery":
            # Primary service discovery by UUID answered with a Read Response, characteristic
            # discovery with a Find Information Response.
            once(0x06, lambda pdu: b"\x0B\x01\x02")
            once(0x08, lambda pdu: b"\x05\x01" + u16(1) + u16(0x2800))
        elif hook == "malformed-find-info":
            # An unknown format, then format 1 with a half pair.
            once(0x04, lambda pdu: b"\x05\x03" + u16(pdu[1] | pdu[2] << 8) + b"\x02\x29")
            once(0x04, lambda pdu: b"\x05\x01" + u16(pdu[1] | pdu[2] << 8) + b"\x02")
        elif hook in ("endless-long-read", "oversized-blob"):
            def blobs(cid, pdu):
                if cid != ATT or len(pdu) < 3 or (pdu[1] | pdu[2] << 8) != long.handle:
                    return False
                if pdu[0] == 0x0A:
                    wire.send(ATT, b"\x0B" + bytes([0xEE]) * (mtu() - 1))
                    return True
                if pdu[0] == 0x0C:
                    counts["blobs"] += 1
                    size = mtu() + 20 if hook == "oversized-blob" else mtu() - 1
                    wire.send(ATT, b"\x0D" + bytes([counts["blobs"] & 0xFF]) * size)
                    return True
                return False
            counts["blobs"] = 0
            wire.hooks.append(blobs)
        elif hook == "channel-open-garbage":
            # Our channel open answered with MTU 10 and MPS 10 (both below 23) on the enhanced
            # request, and with an undefined result on the LE one.
            def garbage(cid, pdu):
                if cid != SIG or len(pdu) < 4:
                    return False
                if pdu[0] == 0x06:
                    say("DISCONNECTION", pdu.hex())
                    return False
                if pdu[0] == 0x17:
                    say("HOOKED", pdu.hex())
                    wire.send(SIG, bytes([0x18, pdu[1]]) + u16(10) + u16(10) + u16(10) + u16(5) + u16(0) + u16(0x0040))
                    return True
                if pdu[0] == 0x14:
                    say("HOOKED", pdu.hex())
                    wire.send(SIG, bytes([0x15, pdu[1]]) + u16(10) + u16(0x0040) + u16(10) + u16(10) + u16(5)
                              + u16(0x0077))
                    return True
                return False
            wire.hooks.append(garbage)
            counts["armed"] = wire.mark()
        elif hook == "smp-initiator-bad-key":
            # Our central pairs (its read was refused for want of encryption): Secure
            # Connections Just Works is answered, then its public key with one off P-256.
            def pairing(cid, pdu):
                if cid != SMP:
                    return False
                say("SMP", pdu.hex())
                if pdu[:1] == b"\x01":
                    wire.send(SMP, bytes.fromhex("02030009100000"))
                elif pdu[:1] == b"\x0C":
                    wire.send(SMP, b"\x0C" + (1).to_bytes(32, "little") + (1).to_bytes(32, "little"))
                return True
            wire.hooks.append(pairing)
        elif hook == "disarm":
            wire.hooks.clear()
            if "armed" in counts:
                wire.report(counts.pop("armed"), cids=(SIG,))
            say("BLOBS", counts["blobs"])
        say("ARMED", hook)

    async def push(scenario):
        mark = wire.mark()
        if scenario == "unsolicited":
            # Responses, a confirmation, nothing asked for.
            for pdu in ["0B4142", "010A01000A", "030002", "13", "1E", "0D00", "1106010005000018", "19", "17010000",
                        "09", "0B" + "AA" * 300]:
                wire.send(ATT, bytes.fromhex(pdu))
            # Until they have reached our stack: a request sent meanwhile would take one of
            # them for its answer (ATT has no transaction identifiers).
            await asyncio.sleep(0.5)
        elif scenario == "bad-notifications":
            handle = notify.handle  # the value handle
            for pdu in [b"\x1B", b"\x1B\x01", b"\x1B\x00\x00\x11", b"\x1B\xFF\xFF\x22", b"\x1B\x99\x09\x33",
                        b"\x1B" + u16(handle) + bytes(mtu() + 10),
                        b"\x1D\x00\x00\x44", b"\x1D\xFF\xFF\x55", b"\x1D\x99\x09\x66", b"\x1D", b"\x1D\x01",
                        b"\x1B" + u16(handle) + b"ok"]:
                wire.send(ATT, pdu)
            await asyncio.sleep(0.5)
            say("CONFIRMATIONS", sum(1 for c, p in wire.since(mark, ATT) if p == b"\x1E"))
        elif scenario == "signalling":
            wire.owned.add(SIG)
            for pdu in ["7F210200AABB",                       # unknown code
                        "12220800" + (u16(0x10) + u16(0x08) + u16(0) + u16(100)).hex(),  # min > max
                        "12230800" + (u16(6) + u16(6) + u16(0) + u16(1)).hex(),    # timeout too short
                        "12240800" + (u16(6) + u16(8) + u16(500) + u16(3200)).hex(),  # latency too big
                        "12250400" + (u16(6) + u16(8)).hex(),                      # truncated
                        "1226080006000800",                                        # length past the data
                        "13270200" + "0000",                                       # unsolicited response
                        "01280200" + "0000",                                       # unsolicited reject
                        "15290A00" + "4000" + "6400" + "4000" + "0A00" + "0000",   # LE CoC response, unasked
                        "062A0400" + "4000" + "4000",                              # disconnect an unknown CID
                        "7E2B" + u16(96).hex() + "00" * 96,                        # past the signalling MTU
                        "14000A00" + "8000" + "4000" + "6400" + "6400" + "0A00"]:  # identifier 0
                wire.send(SIG, bytes.fromhex(pdu))
            await asyncio.sleep(0.5)
            wire.owned.discard(SIG)
        elif scenario == "smp":
            wire.owned.add(SMP)
            for pdu in ["02030008100000",                 # Pairing Response nobody asked for
                        "03" + "00" * 16,                 # Pairing Confirm out of order
                        "0C" + "01" * 64,                 # a Public Key out of order
                        "01030008100000" + "00" * 40,     # an oversized Pairing Request, from a peripheral
                        "FF00",                           # an unknown code
                        ""]:
                wire.send(SMP, bytes.fromhex(pdu))
            await asyncio.sleep(0.5)
            wire.owned.discard(SMP)
        wire.report(mark)
        say("DONE", scenario)

    def on_connection(connection):
        wire.connection = connection
        say("CONNECTED")
        connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))

    device.on("connection", on_connection)
    for hook in armed:
        arm(hook)
    await device.power_on()
    device.advertising_data = bytes(AdvertisingData([
        (AdvertisingData.FLAGS, bytes([0x06])),
        (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
    ]))
    await device.start_advertising(auto_restart=True)
    say("ADVERTISING")
    async for words in commands():
        if words[0] == "arm":
            arm(words[1])
        elif words[0] == "push":
            await push(words[1])


async def commands():
    reader = asyncio.StreamReader()
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        yield line.split()


# ---------------------------------------------------------------------------------------
# Central: our peripheral manager's server, signalling and SMP against a bad client.

async def central(port):
    device = await start(port, "HostileCentral", "F0:17:17:17:17:02")
    wire = Wire(device)
    await device.power_on()
    lines = commands()
    say("LISTENING")
    words = await anext(lines)
    address = words[1]
    text, _, kind = address.partition("/")
    target = Address(text, Address.RANDOM_DEVICE_ADDRESS if kind == "R" else Address.PUBLIC_DEVICE_ADDRESS)
    connection = await device.connect(target)
    wire.connection = connection
    connection.on("disconnection", lambda reason: say("DISCONNECTED", reason))
    peer = Peer(connection)
    await peer.discover_services()
    handles = {}
    for service in peer.services:
        await service.discover_characteristics()
        for characteristic in service.characteristics:
            handles[characteristic.uuid.to_hex_str(separator="-")] = characteristic.handle
    hello, writable = handles[BASE.format(2)], handles[BASE.format(3)]
    indicating = next(c for s in peer.services for c in s.characteristics
                      if c.uuid.to_hex_str(separator="-") == BASE.format(4))
    await indicating.discover_descriptors()
    cccd = next(d.handle for d in indicating.descriptors if d.type.to_hex_str() == "2902")
    say("READY")

    async def request(cid, pdu, answer, timeout=3.0):
        """Sends pdu; the first PDU on cid matching answer(pdu) after it, or None."""
        mark = wire.mark()
        wire.send(cid, pdu)
        return await wire.wait(mark, lambda c, p: c == cid and answer(p), timeout)

    async def att(pdu, timeout=3.0):
        return await request(ATT, pdu, lambda p: p[0] in (0x01, 0x03, 0x0B, 0x13, 0x17, 0x19), timeout)

    async def signal(pdu):
        return await request(SIG, pdu, lambda p: len(p) >= 2 and p[1] == pdu[1] and p[0] != pdu[0])

    async def smp(pdu, timeout=2.0):
        return await request(SMP, pdu, lambda p: True, timeout)

    def coc_request(identifier, psm, scid, mtu=100, mps=50, credits=10):
        return bytes([0x14, identifier]) + u16(10) + u16(psm) + u16(scid) + u16(mtu) + u16(mps) + u16(credits)

    async def run(scenario, argument):
        mark = wire.mark()
        if scenario == "server-unsolicited":
            wire.owned.add(ATT)
            for pdu in ["0B41", "031700", "1E", "1D0300AA", "1B0300AA", "7F00", "D2FF"]:
                wire.send(ATT, bytes.fromhex(pdu))  # nothing answers these
            for pdu in ["3F00", "0A01", "0A" + "01" * 599, "10", "0803", "04"]:
                say("ANSWER", pdu[:8], ((await att(bytes.fromhex(pdu))) or b"").hex())
            # Nine requests at once (one served, eight may wait); the rest are dropped.
            for _ in range(12):
                wire.send(ATT, b"\x0A" + u16(hello))
            await asyncio.sleep(0.5)
            say("PIPELINED", sum(1 for c, p in wire.since(mark, ATT) if p[:1] == b"\x0B"))
            wire.owned.discard(ATT)
        elif scenario == "mtu-twice":
            wire.owned.add(ATT)
            say("FIRST", ((await att(b"\x02" + u16(5))) or b"").hex())
            say("SECOND", ((await att(b"\x02" + u16(0xFFFF))) or b"").hex())
            wire.owned.discard(ATT)
        elif scenario == "prepared-write-flood":
            wire.owned.add(ATT)
            ok = full = other = 0
            pending = 0
            total = 10000
            sent = 0
            seen = wire.mark()
            window = 8
            while sent < total or pending:
                while sent < total and pending < window:
                    wire.send(ATT, b"\x16" + u16(writable) + u16(sent % 512) + bytes([sent & 0xFF]) * 18)
                    sent += 1
                    pending += 1
                got = await wire.wait(seen, lambda c, p: c == ATT, 3.0)
                if got is None:
                    break
                for c, p in wire.since(seen, ATT):
                    pending -= 1
                    if p[0] == 0x17:
                        ok += 1
                    elif p[:2] == b"\x01\x16" and p[4] == 0x09:
                        full += 1
                    else:
                        other += 1
                seen = wire.mark()
            say("PREPARED", f"ok={ok}", f"full={full}", f"other={other}", f"unanswered={pending}")
            say("EXECUTE", ((await att(b"\x18\x00")) or b"").hex())
            wire.owned.discard(ATT)
            say("DONE", scenario)
            return
        elif scenario == "signalling":
            wire.owned.add(SIG)
            for pdu in ["7F210200AABB", "12220800" + (u16(6) + u16(8) + u16(0) + u16(100)).hex(),
                        "12230800" + (u16(0x10) + u16(0x08) + u16(0) + u16(100)).hex(),
                        "062A0400" + "4000" + "4000", "13270200" + "0000", "0A2C0200" + "0000"]:
                say("ANSWER", pdu[:4], ((await signal(bytes.fromhex(pdu))) or b"").hex())
            wire.owned.discard(SIG)
        elif scenario == "invalid-coc-open":
            wire.owned.add(SIG)
            psm = int(argument)
            cases = [("mtu22", coc_request(0x41, psm, 0x0041, mtu=22)),
                     ("mps22", coc_request(0x42, psm, 0x0042, mps=22)),
                     ("mps65534", coc_request(0x43, psm, 0x0043, mps=65534)),
                     ("cid0010", coc_request(0x44, psm, 0x0010)),
                     ("unknown-psm", coc_request(0x45, 0x00F1 if psm != 0x00F1 else 0x00F3, 0x0045)),
                     ("first", coc_request(0x46, psm, 0x0050)),
                     ("duplicate", coc_request(0x47, psm, 0x0050)),
                     ("psm-zero", coc_request(0x48, 0, 0x0048)),
                     ("truncated", bytes([0x14, 0x49]) + u16(6) + u16(psm) + u16(0x0049) + u16(100))]
            for label, pdu in cases:
                answer = await signal(pdu)
                # LE Credit Based Connection Response: dcid mtu mps credits result.
                if answer and answer[0] == 0x15 and len(answer) >= 14:
                    say("OPEN", label, f"result={answer[12] | answer[13] << 8:04x}",
                        f"dcid={answer[4] | answer[5] << 8:04x}")
                else:
                    say("OPEN", label, "answer=" + (answer or b"").hex())
            wire.owned.discard(SIG)
        elif scenario == "credit-flood":
            wire.owned.add(SIG)
            psm = int(argument)
            answer = await signal(coc_request(0x51, psm, 0x0060, credits=10))
            if not answer or len(answer) < 14 or answer[12:14] != b"\x00\x00":
                say("OPEN", "failed", (answer or b"").hex())
            else:
                dcid = answer[4] | answer[5] << 8
                say("OPEN", "ok", f"credits={answer[10] | answer[11] << 8}")
                flood = wire.mark()
                # Our credits: 10, then up to exactly 65535 (allowed), then one more (not).
                wire.send(SIG, bytes([0x16, 0x52]) + u16(4) + u16(0x0060) + u16(65525))
                wire.send(SIG, bytes([0x16, 0x53]) + u16(4) + u16(0x0060) + u16(1))
                closing = await wire.wait(flood, lambda c, p: c == SIG and p[0] == 0x06)
                say("CLOSED", (closing or b"").hex())
                if closing:
                    wire.send(SIG, bytes([0x07, closing[1]]) + u16(4) + closing[4:8])
                # A K-frame on the closed channel's CID goes nowhere.
                wire.send(dcid, u16(2) + b"hi")
            wire.owned.discard(SIG)
        elif scenario == "unconfirmed-indications":
            # Subscribed to indications, never confirming one (Bumble would: it never sees them).
            wire.owned.add(ATT)
            say("SUBSCRIBE", ((await att(b"\x12" + u16(cccd) + u16(2))) or b"").hex())
            await asyncio.sleep(1.5)
            say("INDICATIONS", sum(1 for c, p in wire.since(mark, ATT) if p[:1] == b"\x1D"))
            wire.owned.discard(ATT)
            say("DONE", scenario)
            return
        elif scenario == "smp-out-of-order":
            wire.owned.add(SMP)
            say("CONFIRM-FIRST", ((await smp(bytes.fromhex("03" + "00" * 16))) or b"").hex())
            say("RESPONSE", ((await smp(bytes.fromhex("02030008100000"))) or b"").hex())
            say("RANDOM", ((await smp(bytes.fromhex("04" + "00" * 16))) or b"").hex())
            say("EMPTY", ((await smp(b"", timeout=0.5)) or b"").hex())
            wire.owned.discard(SMP)
        elif scenario == "smp-mid-pairing":
            # A second Pairing Request while ours is answered, then one more after the failure.
            wire.owned.add(SMP)
            say("PAIRING-RESPONSE", ((await smp(bytes.fromhex("01030008100000"))) or b"").hex())
            say("SECOND-REQUEST", ((await smp(bytes.fromhex("01030008100000"))) or b"").hex())
            say("AFTERWARDS", ((await smp(bytes.fromhex("01030008100000"))) or b"").hex())
            wire.owned.discard(SMP)
        elif scenario == "smp-oversized":
            wire.owned.add(SMP)
            say("OVERSIZED", ((await smp(bytes.fromhex("01030008100000" + "00" * 60))) or b"").hex())
            wire.owned.discard(SMP)
        elif scenario == "smp-bad-confirm":
            # LE legacy pairing, Just Works: our confirm value is garbage.
            wire.owned.add(SMP)
            say("PAIRING-RESPONSE", ((await smp(bytes.fromhex("01030000100000"))) or b"").hex())
            say("CONFIRM", ((await smp(bytes.fromhex("03" + "5A" * 16))) or b"").hex())
            say("RANDOM", ((await smp(bytes.fromhex("04" + "A5" * 16))) or b"").hex())
            wire.owned.discard(SMP)
        elif scenario == "smp-bad-public-key":
            # LE Secure Connections: a public key that is not on P-256 (x = y = 1).
            wire.owned.add(SMP)
            say("PAIRING-RESPONSE", ((await smp(bytes.fromhex("01030008100000"))) or b"").hex())
            key = wire.mark()
            wire.send(SMP, b"\x0C" + (1).to_bytes(32, "little") + (1).to_bytes(32, "little"))
            failed = await wire.wait(key, lambda c, p: c == SMP and p[0] == 0x05)
            say("KEY-FAILED", (failed or b"").hex())
            # Carrying on as if it had worked: a confirm, a random, a DHKey check.
            for pdu in ["03" + "11" * 16, "04" + "22" * 16, "0D" + "33" * 16]:
                wire.send(SMP, bytes.fromhex(pdu))
            await asyncio.sleep(0.3)
            say("DHKEY-CHECKS-SENT", sum(1 for c, p in wire.since(key, SMP) if p[:1] == b"\x0D"))
            wire.owned.discard(SMP)
        wire.report(mark)
        say("DONE", scenario)

    async def check():
        answer = await att(b"\x0A" + u16(hello))
        say("READ-OK" if answer and answer[0] == 0x0B else "READ-FAILED", (answer or b"").hex())

    async for words in lines:
        if words[0] == "run":
            await run(words[1], words[2] if len(words) > 2 else None)
        elif words[0] == "check":
            await check()


if __name__ == "__main__":
    arguments = sys.argv[1:]
    if arguments[0] == "peripheral":
        asyncio.run(peripheral(int(arguments[1]), arguments[2], arguments[3:]))
    else:
        asyncio.run(central(int(arguments[1])))
