#!/usr/bin/env python3
"""Writes the seed corpora under Fuzz/corpus/<target>/ from the spec vectors in Tests/, the
specs in specs/ and a hand-made btsnoop session (the one Tests/CBToolTests/RecordTests.swift
builds). Run again after adding vectors; the files are committed. Each seed is in the format
its harness reads (see the comment at the top of each Fuzz/Targets/*.swift)."""
import hashlib, os, re, struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "Fuzz", "corpus")
HEX = re.compile(r'"((?:[0-9a-fA-F]{2} ?)+)"')


def vectors(*paths):
    """Every quoted hex string (two or more octets) in these test files."""
    found = []
    for path in paths:
        with open(os.path.join(ROOT, path)) as f:
            for m in HEX.finditer(f.read()):
                b = bytes.fromhex(m.group(1).replace(" ", ""))
                if len(b) >= 2 and b not in found:
                    found.append(b)
    return found


def write(target, seeds):
    """Replaces the generated seeds of `target`, keeping the inputs of past findings
    (finding-*), which are seeds too."""
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for name in os.listdir(d):
        if not name.startswith("finding-"):
            os.remove(os.path.join(d, name))
    for s in seeds:
        with open(os.path.join(d, hashlib.sha1(s).hexdigest()[:16]), "wb") as f:
            f.write(s)


def rec(b):
    return bytes([len(b)]) + b


def l2cap(cid, payload):
    return struct.pack("<HH", len(payload), cid) + payload


def acl(pdu, handle=0x40):
    return bytes([0x02]) + struct.pack("<HH", handle | 0x2000, len(pdu)) + pdu


def att_acl(pdu):
    return acl(l2cap(4, pdu))


# HCI events (code, parameters), as controllers send them.
events = [
    bytes.fromhex("0e 04 01 03 0c 00"),  # Command Complete, Reset
    bytes.fromhex("0f 04 00 01 0d 20"),  # Command Status, LE Create Connection
    bytes.fromhex("05 04 00 40 00 13"),  # Disconnection Complete
    bytes.fromhex("08 04 00 40 00 01"),  # Encryption Change
    bytes.fromhex("13 05 01 40 00 01 00"),  # Number Of Completed Packets
    bytes.fromhex("3e 13 01 00 40 00 00 01 11 22 33 44 55 c6 18 00 00 00 f4 01 00"),  # LE Connection Complete
    bytes.fromhex("3e 15 02 01 00 01 11 22 33 44 55 c6 09 02 01 06 05 09 4c 61 6d 70 c0"),  # LE Advertising Report
    bytes.fromhex("3e 0d 05 40 00 00 00 00 00 00 00 00 00 00 00"),  # LE Long Term Key Request
    bytes.fromhex("3e 0a 03 00 40 00 18 00 00 00 48 00"),  # LE Connection Update Complete
    bytes.fromhex("0e 0c 01 01 10 00 0d 00 01 0d 02 00 22 22"),  # Read Local Version
    bytes.fromhex("10 01 42"),  # Hardware Error
]
# Each carries its length octet (code, length, parameters): an H4 frame is the indicator + it.
h4_events = [bytes([0x04]) + e for e in events]
write("hci-event", [e[:1] + e[2:] for e in events])

att = vectors("Tests/ATTTests/ATTVectors.swift")
frames = h4_events + [att_acl(p) for p in att[:20]] + [bytes.fromhex("01 03 0c 00")]
write("h4", [bytes([255]) + f for f in frames] + [bytes([2]) + b"".join(frames[:8])])

write("att-pdu", att)

# The server: setup 0x4F (MTU 517 offered, prepared writes allowed), then each request.
requests = [p for p in att if p[0] in (0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20, 0x52, 0xD2, 0x1E)]
discovery = [bytes.fromhex(h) for h in [
    "02 00 02", "10 01 00 ff ff 00 28", "10 01 00 ff ff 01 28", "08 01 00 ff ff 02 28", "08 01 00 ff ff 03 28",
    "04 01 00 ff ff", "0a 03 00", "0c 0d 00 16 00", "16 0d 00 00 00 01 02", "16 0d 00 02 00 03", "18 01",
    "12 0c 00 01 00", "52 0d 00 05", "0e 03 00 0d 00", "20 03 00 0d 00", "1e",
]]
write("att-server", [b"\x4f" + b"\x00" + rec(p) for p in requests]
      + [b"\x4f" + b"".join(b"\x00" + rec(p) for p in discovery)])

# The client: two procedures started (discovery, long read...), then the server's answers.
responses = [p for p in att if p[0] in (0x01, 0x03, 0x05, 0x07, 0x09, 0x0B, 0x0D, 0x0F, 0x11, 0x13, 0x17, 0x19, 0x1B, 0x1D, 0x21, 0x23)]
client = []
for proc in range(15):
    for p in responses:
        if len(client) < 120 or p[0] in (0x0B, 0x11, 0x09):
            client.append(bytes([proc, 15]) + b"\x00" + rec(p))
write("gatt-client", client[:400])

smp = vectors("Tests/SMPTests/SMPPDUTests.swift")
pairing = bytes.fromhex("01 03 00 2d 10 07 07")
seeds = []
for setup in (0x00, 0x01, 0x10, 0x11):
    for io in (0, 3, 4):
        seeds.append(bytes([setup, io]) + b"\x00" + rec(pairing) + b"\x04" + b"".join(b"\x00" + rec(p) for p in smp[:6]))
seeds += [bytes([0x01, 3]) + b"\x00" + rec(p) for p in smp]
write("smp", seeds)

adv = vectors("Tests/GAPTests/ADTypeVectorTests.swift", "Tests/GAPTests/AdvertisingDecodingTests.swift")
write("adv-data", adv)

sig = vectors("Tests/L2CAPTests/L2CAPTests.swift", "Tests/L2CAPTests/L2CAPCreditChannelTests.swift")
l2 = []
for s in sig:
    l2.append(b"\x12" + b"\x04" + rec(l2cap(5, s)))  # whole signalling PDU
    frame = l2cap(5, s)
    # the same cut in two ACL fragments (start, continuation)
    l2.append(b"\x12" + b"\x10" + rec(frame[:3]) + b"\x08" + rec(frame[3:]))
# An LE credit-based channel opened by the peer, then K-frames on it (our CID 0x40), SDU 10 in two.
open_req = l2cap(5, bytes.fromhex("14 20 0a 00 80 00 50 00 00 04 f7 00 0a 00"))
kf = l2cap(0x40, bytes.fromhex("0a 00 01 02 03 04 05")) + b""
kf2 = l2cap(0x40, bytes.fromhex("06 07 08 09 0a"))
l2.append(b"\x0f" + b"\x04" + rec(open_req) + b"\x04" + rec(kf) + b"\x04" + rec(kf2) + b"\x05" + rec(b"hello") + b"\x07")
write("acl-l2cap", l2)


def btsnoop(frames, datalink=1002):
    out = b"btsnoop\x00" + struct.pack(">II", 1, datalink)
    for i, (frame, received) in enumerate(frames):
        flags = (1 if received else 0) | (2 if frame[0] in (1, 4) else 0)
        t = 1_700_000_000_000_000 + i * 10_000 + 0x00DCDDB30F2F8000
        out += struct.pack(">IIIIQ", len(frame), len(frame), flags, 0, t) + frame
    return out


peer = bytes([0x11, 0x22, 0x33, 0x44, 0x55, 0xC6])
advd = bytes([0x02, 0x01, 0x06, 0x05, 0x09]) + b"Lamp"
lamp = [
    (bytes([0x04, 0x3E, 12 + len(advd), 0x02, 0x01, 0x00, 0x01]) + peer + bytes([len(advd)]) + advd + b"\xc0", True),
    (bytes([0x04, 0x3E, 0x13, 0x01, 0x00, 0x40, 0x00, 0x00, 0x01]) + peer + bytes([0x18, 0, 0, 0, 0xF4, 1, 0]), True),
] + [(att_acl(bytes.fromhex(h)), r) for h, r in [
    ("10 01 00 ff ff 00 28", False), ("11 06 01 00 05 00 00 ff", True), ("08 01 00 05 00 03 28", False),
    ("09 07 02 00 08 03 00 01 ff 04 00 02 05 00 02 ff", True), ("0a 05 00", False), ("0b 6f 66", True),
    ("0c 05 00 02 00", False), ("0d 66", True), ("12 03 00 01", False), ("13", True), ("0a 05 00", False),
    ("0b 6f 6e", True), ("1b 05 00 01", True),
]]
write("capture", [btsnoop(lamp), btsnoop(lamp[:4]),
                  btsnoop([(f[1:], r) for f, r in lamp], datalink=1001)])
write("btsnoop", [btsnoop(lamp), btsnoop([(f, True) for f in frames[:12]]), btsnoop([])])

# Shared-radio frame bodies (type, fields), as RadioWireMessage encodes them.
def blob(b):
    return struct.pack("<H", len(b)) + b
pos = struct.pack("<ddd", 1.0, 2.0, 0.0)
adv_pdu = bytes.fromhex("40 0c 11 22 33 44 55 c6 02 01 06 02 0a 00")
write("radio-wire", [
    b"\x01" + struct.pack("<H", 1), b"\x02" + struct.pack("<I", 0x10001) + pos, b"\x03" + struct.pack("<I", 0x10001),
    b"\x04" + struct.pack("<I", 1) + pos, b"\x05" + struct.pack("<Id", 1, -4.0), b"\x06" + struct.pack("<IB", 1, 1),
    b"\x10" + struct.pack("<II", 1, 0) + blob(adv_pdu), b"\x11" + struct.pack("<IIBB", 1, 0, 1, 0) + blob(adv_pdu),
    b"\x12" + struct.pack("<IIBB", 1, 0x8E89BED6, 1, 0) + blob(b"\x02\x07\x03\x00\x04\x00\x0a\x03\x00"),
    b"\x20" + struct.pack("<III", 0x50654321, 1, 2), b"\x21" + struct.pack("<I", 0x50654321),
    b"\x22" + struct.pack("<II", 0x50654321, 1), b"\x81" + struct.pack("<HHB", 1, 3, 1),
    b"\x90" + struct.pack("<IIb", 1, 2, -40) + blob(adv_pdu), b"\x91" + struct.pack("<IIBBb", 1, 2, 1, 2, -40) + blob(adv_pdu),
    b"\x92" + struct.pack("<IIbB", 1, 0x50654321, -40, 1) + blob(b"\x01\x00"), b"\xa0" + struct.pack("<IIB", 1, 0x50654321, 1),
])

specs = []
for name in sorted(os.listdir(os.path.join(ROOT, "specs"))):
    with open(os.path.join(ROOT, "specs", name), "rb") as f:
        specs.append(f.read())
write("peripheral-spec", specs)

# corebluetoothd's wire protocol (docs/daemon.md): raw frames (first byte even: the chunk size
# a socket delivers them in), and scripts (first byte odd) that scan, connect, discover, read,
# subscribe and write against the harness's peripheral, as daemon-wire.swift reads them.
def frame(kind, fields=b""):
    return struct.pack("<IH", len(fields) + 2, kind) + fields
def dstring(s):
    return struct.pack("<I", len(s)) + s
bench_peer = bytes([0]) + bytes.fromhex("02 17 00 00 00 c0")
hello = frame(0x0001, struct.pack("<HH", 1, 1) + dstring(b"seed"))
open_central = frame(0x0002, struct.pack("<I", 1) + b"\x00")
scan = frame(0x0010, struct.pack("<I", 1) + b"\x01" + struct.pack("<H", 1) + b"\x02\x00\xaa" + struct.pack("<H", 0) + b"\x00")
connect = frame(0x0012, struct.pack("<I", 1) + bench_peer + b"\x00")
discover = frame(0x0020, struct.pack("<I", 1) + bench_peer + struct.pack("<I", 7) + b"\x00")
read = frame(0x0024, struct.pack("<I", 1) + bench_peer + struct.pack("<IH", 8, 3))
write_ = frame(0x0025, struct.pack("<I", 1) + bench_peer + struct.pack("<IH", 9, 3) + dstring(b"\x01\x02"))
step = lambda op, *rest: bytes([op, 1, 0, 0]) + bytes(rest)  # op, the bench's peer, handle 0
wait = lambda known=0: bytes([0xFF, 1, 0, 0]) + bytes(known)
script = (b"\x01" + struct.pack("<H", 1) + step(0x00, 0) + step(0x03, 1, 0) + wait() + step(0x05, 0) + wait()
          + step(0x07, 0) + wait() + step(0x09, 0) + wait(1) + step(0x0B, 0, 0) + wait(2)
          + step(0x0E, 0, 0, 0, 1) + wait(2) + step(0x0C, 0, 0, 16, 0) + bytes(range(16)) + wait(2)
          + step(0x0A, 0, 0) + wait(2) + step(0x0F, 0, 0) + wait(2) + step(0x06, 0, 0, 1) + step(0x02, 0, 0))
# Version 2: channels and pairing prompts (docs/daemon.md, "Channels and pairing").
hello2 = frame(0x0001, struct.pack("<HH", 2, 1) + dstring(b"seed"))
open_peripheral = frame(0x0003, struct.pack("<I", 2) + b"\x00")
channels = (frame(0x0058, struct.pack("<I", 1) + b"\x01\x04")
            + frame(0x0050, struct.pack("<I", 1) + bench_peer + struct.pack("<IH", 10, 0x80))
            + frame(0x0051, struct.pack("<II", 2, 11) + b"\x00\x01")
            + frame(0x0051, struct.pack("<II", 2, 12) + b"\x01" + struct.pack("<H", 0x25) + b"\x00")
            + frame(0x0053, struct.pack("<II", 1, 1) + dstring(b"\x01\x02\x03"))
            + frame(0x0054, struct.pack("<III", 1, 1, 3)) + frame(0x0055, struct.pack("<II", 1, 1) + b"\x01")
            + frame(0x0056, struct.pack("<II", 1, 1)) + frame(0x0059, struct.pack("<II", 1, 1) + b"\x02" + struct.pack("<I", 123456))
            + frame(0x0052, struct.pack("<IIH", 2, 13, 0x25)))
write("daemon-wire", [
    b"\xfe" + hello + open_central + scan + connect + discover + read + write_,
    b"\xfe" + hello2 + open_central + open_peripheral + scan + connect + channels,
    b"\x00" + hello + open_central + frame(0x0004, struct.pack("<I", 1)),
    b"\x10" + hello + frame(0x8001, struct.pack("<H", 1) + b"\x00"),
    b"\x20" + frame(0x0002, struct.pack("<I", 1) + b"\x01" + dstring(b"r")),
    script,
    b"\x01" + struct.pack("<H", 1) + step(0x00, 1) + step(0x05, 1) + wait() + step(0x02, 0),
])
