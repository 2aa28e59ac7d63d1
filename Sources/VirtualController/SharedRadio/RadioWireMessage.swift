import ByteCoding
import HCI

/// What crosses the Unix socket between a `RadioServer` and its `RadioProxy` clients: the
/// link-layer PDUs in their on-air encodings, plus what the radio needs to route them (device
/// ids, positions, transmit power, power state, PHY, links). RSSI and air time are the
/// server's: it runs the one `VirtualRadio` every device is on.
///
/// Each frame is a 4-byte little-endian length, then a 1-byte message type, then the fields.
/// Device ids are global: the client number the server gave the process in the high 16 bits,
/// the process's own device counter in the low 16.
enum RadioWireMessage: Equatable, Sendable {
    // Client to server.
    case hello(version: UInt16)
    case attach(device: UInt32, position: RadioPosition)
    case detach(device: UInt32)
    case move(device: UInt32, position: RadioPosition)
    case txPower(device: UInt32, offset: Double)
    case power(device: UInt32, on: Bool)
    /// `to` 0: broadcast.
    case sendAdvertising(from: UInt32, to: UInt32, pdu: [UInt8])
    case sendExtended(from: UInt32, to: UInt32, phy: UInt8, kind: UInt8, pdu: [UInt8])
    case sendData(from: UInt32, accessAddress: UInt32, phy: UInt8, hasMIC: Bool, pdu: [UInt8])
    case openLink(accessAddress: UInt32, a: UInt32, b: UInt32)
    case closeLink(accessAddress: UInt32)
    case abandonLink(accessAddress: UInt32, by: UInt32)

    // Server to client.
    case welcome(version: UInt16, client: UInt16, timedAirTime: Bool)
    case heardAdvertising(to: UInt32, from: UInt32, rssi: Int8, pdu: [UInt8])
    case heardExtended(to: UInt32, from: UInt32, phy: UInt8, kind: UInt8, rssi: Int8, pdu: [UInt8])
    case heardData(to: UInt32, accessAddress: UInt32, rssi: Int8, hasMIC: Bool, pdu: [UInt8])
    case link(to: UInt32, accessAddress: UInt32, reachable: Bool)

    static let version: UInt16 = 1
    /// Frames longer than this are refused as garbage.
    static let maxFrameLength = 4096

    /// The frame: length, type, fields.
    func frame() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        func position(_ p: RadioPosition) { w.u64(p.x.bitPattern); w.u64(p.y.bitPattern); w.u64(p.z.bitPattern) }
        func blob(_ bytes: [UInt8]) { w.u16(UInt16(bytes.count)); w.bytes(bytes) }
        switch self {
        case .hello(let v): w.u8(0x01); w.u16(v)
        case .attach(let d, let p): w.u8(0x02); w.u32(d); position(p)
        case .detach(let d): w.u8(0x03); w.u32(d)
        case .move(let d, let p): w.u8(0x04); w.u32(d); position(p)
        case .txPower(let d, let o): w.u8(0x05); w.u32(d); w.u64(o.bitPattern)
        case .power(let d, let on): w.u8(0x06); w.u32(d); w.u8(on ? 1 : 0)
        case .sendAdvertising(let f, let t, let pdu): w.u8(0x10); w.u32(f); w.u32(t); blob(pdu)
        case .sendExtended(let f, let t, let phy, let kind, let pdu): w.u8(0x11); w.u32(f); w.u32(t); w.u8(phy); w.u8(kind); blob(pdu)
        case .sendData(let f, let aa, let phy, let mic, let pdu): w.u8(0x12); w.u32(f); w.u32(aa); w.u8(phy); w.u8(mic ? 1 : 0); blob(pdu)
        case .openLink(let aa, let a, let b): w.u8(0x20); w.u32(aa); w.u32(a); w.u32(b)
        case .closeLink(let aa): w.u8(0x21); w.u32(aa)
        case .abandonLink(let aa, let by): w.u8(0x22); w.u32(aa); w.u32(by)
        case .welcome(let v, let c, let timed): w.u8(0x81); w.u16(v); w.u16(c); w.u8(timed ? 1 : 0)
        case .heardAdvertising(let t, let f, let rssi, let pdu): w.u8(0x90); w.u32(t); w.u32(f); w.u8(UInt8(bitPattern: rssi)); blob(pdu)
        case .heardExtended(let t, let f, let phy, let kind, let rssi, let pdu):
            w.u8(0x91); w.u32(t); w.u32(f); w.u8(phy); w.u8(kind); w.u8(UInt8(bitPattern: rssi)); blob(pdu)
        case .heardData(let t, let aa, let rssi, let mic, let pdu):
            w.u8(0x92); w.u32(t); w.u32(aa); w.u8(UInt8(bitPattern: rssi)); w.u8(mic ? 1 : 0); blob(pdu)
        case .link(let t, let aa, let reachable): w.u8(0xA0); w.u32(t); w.u32(aa); w.u8(reachable ? 1 : 0)
        }
        var framed = ByteWriter(capacity: w.bytes.count + 4)
        framed.u32(UInt32(w.bytes.count))
        framed.bytes(w.bytes)
        return framed.bytes
    }

    /// Decodes one frame's body (type and fields, without the length).
    init(decoding body: [UInt8]) throws {
        var r = ByteReader(body, context: "radio message")
        func position() throws -> RadioPosition {
            RadioPosition(x: Double(bitPattern: try r.u64()), y: Double(bitPattern: try r.u64()), z: Double(bitPattern: try r.u64()))
        }
        func blob() throws -> [UInt8] { try r.bytes(Int(try r.u16())) }
        func rssi() throws -> Int8 { Int8(bitPattern: try r.u8()) }
        switch try r.u8() {
        case 0x01: self = .hello(version: try r.u16())
        case 0x02: self = .attach(device: try r.u32(), position: try position())
        case 0x03: self = .detach(device: try r.u32())
        case 0x04: self = .move(device: try r.u32(), position: try position())
        case 0x05: self = .txPower(device: try r.u32(), offset: Double(bitPattern: try r.u64()))
        case 0x06: self = .power(device: try r.u32(), on: try r.u8() != 0)
        case 0x10: self = .sendAdvertising(from: try r.u32(), to: try r.u32(), pdu: try blob())
        case 0x11: self = .sendExtended(from: try r.u32(), to: try r.u32(), phy: try r.u8(), kind: try r.u8(), pdu: try blob())
        case 0x12: self = .sendData(from: try r.u32(), accessAddress: try r.u32(), phy: try r.u8(), hasMIC: try r.u8() != 0, pdu: try blob())
        case 0x20: self = .openLink(accessAddress: try r.u32(), a: try r.u32(), b: try r.u32())
        case 0x21: self = .closeLink(accessAddress: try r.u32())
        case 0x22: self = .abandonLink(accessAddress: try r.u32(), by: try r.u32())
        case 0x81: self = .welcome(version: try r.u16(), client: try r.u16(), timedAirTime: try r.u8() != 0)
        case 0x90: self = .heardAdvertising(to: try r.u32(), from: try r.u32(), rssi: try rssi(), pdu: try blob())
        case 0x91: self = .heardExtended(to: try r.u32(), from: try r.u32(), phy: try r.u8(), kind: try r.u8(), rssi: try rssi(), pdu: try blob())
        case 0x92: self = .heardData(to: try r.u32(), accessAddress: try r.u32(), rssi: try rssi(), hasMIC: try r.u8() != 0, pdu: try blob())
        case 0xA0: self = .link(to: try r.u32(), accessAddress: try r.u32(), reachable: try r.u8() != 0)
        case let type: throw DecodeError("radio message: unknown type 0x\(String(type, radix: 16))")
        }
        try r.expectEnd()
    }
}

extension ExtendedAdvertisingPDU {
    /// The kind's index on the wire (AUX_ADV_IND, AUX_SCAN_RSP and AUX_CHAIN_IND share a PDU
    /// type on the air, where the receiver tells them apart by timing).
    var wireKind: UInt8 { UInt8(Kind.allCases.firstIndex(of: kind)!) }

    static func kind(wire: UInt8) throws -> Kind {
        guard Int(wire) < Kind.allCases.count else { throw DecodeError("radio message: unknown extended PDU kind \(wire)") }
        return Kind.allCases[Int(wire)]
    }
}
