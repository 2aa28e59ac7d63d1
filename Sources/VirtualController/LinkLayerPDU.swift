import ByteCoding
import HCI

/// Advertising physical channel PDUs (Core spec Vol 6 Part B §2.3), encoded as on the air
/// (header + payload; no preamble, access address or CRC). This is what crosses the virtual
/// radio between controllers, so the radio can be shared by processes as plain bytes.
public enum AdvertisingPDU: Hashable, Sendable {
    case advInd(advA: LEAddress, data: [UInt8])
    case advDirectInd(advA: LEAddress, targetA: LEAddress)
    case advNonconnInd(advA: LEAddress, data: [UInt8])
    case advScanInd(advA: LEAddress, data: [UInt8])
    case scanReq(scanA: LEAddress, advA: LEAddress)
    case scanRsp(advA: LEAddress, data: [UInt8])
    case connectInd(initA: LEAddress, advA: LEAddress, llData: ConnectLLData)

    var pduType: UInt8 {
        switch self {
        case .advInd: 0b0000
        case .advDirectInd: 0b0001
        case .advNonconnInd: 0b0010
        case .scanReq: 0b0011
        case .scanRsp: 0b0100
        case .connectInd: 0b0101
        case .advScanInd: 0b0110
        }
    }

    /// The advertiser's address, for every PDU type.
    public var advA: LEAddress {
        switch self {
        case .advInd(let a, _), .advDirectInd(let a, _), .advNonconnInd(let a, _), .advScanInd(let a, _),
             .scanReq(_, let a), .scanRsp(let a, _), .connectInd(_, let a, _): a
        }
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 40)
        // TxAdd describes the first address in the payload, RxAdd the second.
        func header(tx: LEAddress, rx: LEAddress?, length: Int) {
            w.u8(pduType | (tx.isRandom ? 0x40 : 0) | ((rx?.isRandom ?? false) ? 0x80 : 0))
            w.u8(UInt8(length))
        }
        switch self {
        case .advInd(let a, let d), .advNonconnInd(let a, let d), .advScanInd(let a, let d), .scanRsp(let a, let d):
            header(tx: a, rx: nil, length: 6 + d.count)
            w.address(a.address); w.bytes(d)
        case .advDirectInd(let a, let t):
            header(tx: a, rx: t, length: 12)
            w.address(a.address); w.address(t.address)
        case .scanReq(let s, let a):
            header(tx: s, rx: a, length: 12)
            w.address(s.address); w.address(a.address)
        case .connectInd(let i, let a, let ll):
            header(tx: i, rx: a, length: 34)
            w.address(i.address); w.address(a.address); ll.encode(into: &w)
        }
        return w.bytes
    }

    public init(decoding bytes: [UInt8]) throws {
        var r = ByteReader(bytes, context: "advertising PDU")
        let h0 = try r.u8()
        let length = Int(try r.u8())
        guard r.remaining == length else { throw DecodeError("advertising PDU: length \(length) but \(r.remaining) bytes") }
        let tx: LEAddressType = h0 & 0x40 != 0 ? .randomDevice : .publicDevice
        let rx: LEAddressType = h0 & 0x80 != 0 ? .randomDevice : .publicDevice
        func data() throws -> [UInt8] {
            guard r.remaining <= 31 else { throw DecodeError("advertising PDU: data longer than 31 bytes") }
            return r.rest()
        }
        switch h0 & 0x0F {
        case 0b0000: self = .advInd(advA: LEAddress(tx, try r.address()), data: try data())
        case 0b0010: self = .advNonconnInd(advA: LEAddress(tx, try r.address()), data: try data())
        case 0b0110: self = .advScanInd(advA: LEAddress(tx, try r.address()), data: try data())
        case 0b0100: self = .scanRsp(advA: LEAddress(tx, try r.address()), data: try data())
        case 0b0001: self = .advDirectInd(advA: LEAddress(tx, try r.address()), targetA: LEAddress(rx, try r.address()))
        case 0b0011: self = .scanReq(scanA: LEAddress(tx, try r.address()), advA: LEAddress(rx, try r.address()))
        case 0b0101:
            self = .connectInd(initA: LEAddress(tx, try r.address()), advA: LEAddress(rx, try r.address()),
                               llData: try ConnectLLData(decoding: &r))
        case let t: throw DecodeError("advertising PDU: unsupported type \(t)")
        }
        try r.expectEnd()
    }
}

/// CONNECT_IND's LLData (Vol 6 Part B §2.3.3.1).
public struct ConnectLLData: Hashable, Sendable {
    public var accessAddress: UInt32
    public var crcInit: UInt32
    public var windowSize: UInt8
    public var windowOffset: UInt16
    /// Units of 1.25 ms.
    public var interval: UInt16
    public var latency: UInt16
    /// Units of 10 ms.
    public var timeout: UInt16
    public var channelMap: UInt64  // 37 bits
    public var hop: UInt8
    public var sca: UInt8

    public init(accessAddress: UInt32, crcInit: UInt32 = 0x555555, windowSize: UInt8 = 2, windowOffset: UInt16 = 0,
                interval: UInt16, latency: UInt16, timeout: UInt16, channelMap: UInt64 = 0x1F_FFFF_FFFF,
                hop: UInt8 = 7, sca: UInt8 = 0) {
        self.accessAddress = accessAddress
        self.crcInit = crcInit
        self.windowSize = windowSize
        self.windowOffset = windowOffset
        self.interval = interval
        self.latency = latency
        self.timeout = timeout
        self.channelMap = channelMap
        self.hop = hop
        self.sca = sca
    }

    func encode(into w: inout ByteWriter) {
        w.u32(accessAddress); w.u24(crcInit & 0xFFFFFF); w.u8(windowSize); w.u16(windowOffset)
        w.u16(interval); w.u16(latency); w.u16(timeout)
        for i in 0..<5 { w.u8(UInt8(truncatingIfNeeded: channelMap >> (8 * UInt64(i)))) }
        w.u8(hop & 0x1F | sca << 5)
    }

    init(decoding r: inout ByteReader) throws {
        accessAddress = try r.u32(); crcInit = try r.u24(); windowSize = try r.u8(); windowOffset = try r.u16()
        interval = try r.u16(); latency = try r.u16(); timeout = try r.u16()
        var map: UInt64 = 0
        for i in 0..<5 { map |= UInt64(try r.u8()) << (8 * UInt64(i)) }
        channelMap = map
        let hs = try r.u8()
        hop = hs & 0x1F
        sca = hs >> 5
    }
}

/// LLID of a data physical channel PDU (Vol 6 Part B §2.4).
public enum LLID: UInt8, Sendable {
    /// Continuation fragment of an L2CAP message, or an empty PDU.
    case continuation = 0b01
    /// Start of an L2CAP message, or a complete one.
    case start = 0b10
    case control = 0b11
}

/// LL control PDUs (Vol 6 Part B §2.4.2) the virtual link layer uses.
public enum LLControlPDU: Hashable, Sendable {
    case connectionUpdateInd(windowSize: UInt8, windowOffset: UInt16, interval: UInt16, latency: UInt16, timeout: UInt16, instant: UInt16)
    case terminateInd(errorCode: UInt8)
    case encReq(rand: UInt64, ediv: UInt16, skdm: UInt64, ivm: UInt32)
    case encRsp(skds: UInt64, ivs: UInt32)
    case startEncReq
    case startEncRsp
    case unknownRsp(unknownType: UInt8)
    case featureReq(features: UInt64)
    case featureRsp(features: UInt64)
    case pauseEncReq
    case pauseEncRsp
    case versionInd(version: UInt8, companyID: UInt16, subversion: UInt16)
    case rejectInd(errorCode: UInt8)
    case peripheralFeatureReq(features: UInt64)
    case connectionParamReq(ConnectionParameters)
    case connectionParamRsp(ConnectionParameters)
    case rejectExtInd(rejectOpcode: UInt8, errorCode: UInt8)
    case pingReq
    case pingRsp
    case lengthReq(DataLength)
    case lengthRsp(DataLength)
    case phyReq(txPhys: UInt8, rxPhys: UInt8)
    case phyRsp(txPhys: UInt8, rxPhys: UInt8)
    case phyUpdateInd(centralToPeripheral: UInt8, peripheralToCentral: UInt8, instant: UInt16)

    /// CtrData of LL_CONNECTION_PARAM_REQ/RSP (Vol 6 Part B §2.4.2.16), 23 octets.
    public struct ConnectionParameters: Hashable, Sendable {
        public var intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16
        /// In connection intervals; 0: no preference.
        public var preferredPeriodicity: UInt8
        public var referenceConnEventCount: UInt16
        /// Offset0–Offset5 in 1.25 ms units; 0xFFFF: not valid. Always six on the air.
        public var offsets: [UInt16]
        public init(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16,
                    preferredPeriodicity: UInt8 = 0, referenceConnEventCount: UInt16 = 0,
                    offsets: [UInt16] = [UInt16](repeating: 0xFFFF, count: 6)) {
            self.intervalMin = intervalMin; self.intervalMax = intervalMax; self.latency = latency; self.timeout = timeout
            self.preferredPeriodicity = preferredPeriodicity
            self.referenceConnEventCount = referenceConnEventCount
            self.offsets = offsets
        }
    }

    public struct DataLength: Hashable, Sendable {
        public var maxRxOctets: UInt16, maxRxTime: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16
        public init(maxRxOctets: UInt16, maxRxTime: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16) {
            self.maxRxOctets = maxRxOctets; self.maxRxTime = maxRxTime; self.maxTxOctets = maxTxOctets; self.maxTxTime = maxTxTime
        }
    }

    public var opcode: UInt8 {
        switch self {
        case .connectionUpdateInd: 0x00
        case .terminateInd: 0x02
        case .encReq: 0x03
        case .encRsp: 0x04
        case .startEncReq: 0x05
        case .startEncRsp: 0x06
        case .unknownRsp: 0x07
        case .featureReq: 0x08
        case .featureRsp: 0x09
        case .pauseEncReq: 0x0A
        case .pauseEncRsp: 0x0B
        case .versionInd: 0x0C
        case .rejectInd: 0x0D
        case .peripheralFeatureReq: 0x0E
        case .connectionParamReq: 0x0F
        case .connectionParamRsp: 0x10
        case .rejectExtInd: 0x11
        case .pingReq: 0x12
        case .pingRsp: 0x13
        case .lengthReq: 0x14
        case .lengthRsp: 0x15
        case .phyReq: 0x16
        case .phyRsp: 0x17
        case .phyUpdateInd: 0x18
        }
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.u8(opcode)
        switch self {
        case .connectionUpdateInd(let ws, let wo, let i, let l, let t, let instant):
            w.u8(ws); w.u16(wo); w.u16(i); w.u16(l); w.u16(t); w.u16(instant)
        case .terminateInd(let e), .rejectInd(let e): w.u8(e)
        case .encReq(let rand, let ediv, let skdm, let ivm): w.u64(rand); w.u16(ediv); w.u64(skdm); w.u32(ivm)
        case .encRsp(let skds, let ivs): w.u64(skds); w.u32(ivs)
        case .startEncReq, .startEncRsp, .pauseEncReq, .pauseEncRsp, .pingReq, .pingRsp: break
        case .unknownRsp(let t): w.u8(t)
        case .featureReq(let f), .featureRsp(let f), .peripheralFeatureReq(let f): w.u64(f)
        case .versionInd(let v, let c, let s): w.u8(v); w.u16(c); w.u16(s)
        case .connectionParamReq(let p), .connectionParamRsp(let p):
            w.u16(p.intervalMin); w.u16(p.intervalMax); w.u16(p.latency); w.u16(p.timeout)
            w.u8(p.preferredPeriodicity); w.u16(p.referenceConnEventCount)
            for i in 0..<6 { w.u16(i < p.offsets.count ? p.offsets[i] : 0xFFFF) }
        case .rejectExtInd(let op, let e): w.u8(op); w.u8(e)
        case .lengthReq(let d), .lengthRsp(let d):
            w.u16(d.maxRxOctets); w.u16(d.maxRxTime); w.u16(d.maxTxOctets); w.u16(d.maxTxTime)
        case .phyReq(let t, let r), .phyRsp(let t, let r): w.u8(t); w.u8(r)
        case .phyUpdateInd(let c2p, let p2c, let instant): w.u8(c2p); w.u8(p2c); w.u16(instant)
        }
        return w.bytes
    }

    public init(decoding bytes: ArraySlice<UInt8>) throws {
        var r = ByteReader(bytes, context: "LL control PDU")
        let opcode = try r.u8()
        func params() throws -> ConnectionParameters {
            ConnectionParameters(intervalMin: try r.u16(), intervalMax: try r.u16(), latency: try r.u16(), timeout: try r.u16(),
                                 preferredPeriodicity: try r.u8(), referenceConnEventCount: try r.u16(),
                                 offsets: try (0..<6).map { _ in try r.u16() })
        }
        func length() throws -> DataLength {
            DataLength(maxRxOctets: try r.u16(), maxRxTime: try r.u16(), maxTxOctets: try r.u16(), maxTxTime: try r.u16())
        }
        switch opcode {
        case 0x00: self = .connectionUpdateInd(windowSize: try r.u8(), windowOffset: try r.u16(), interval: try r.u16(),
                                               latency: try r.u16(), timeout: try r.u16(), instant: try r.u16())
        case 0x02: self = .terminateInd(errorCode: try r.u8())
        case 0x03: self = .encReq(rand: try r.u64(), ediv: try r.u16(), skdm: try r.u64(), ivm: try r.u32())
        case 0x04: self = .encRsp(skds: try r.u64(), ivs: try r.u32())
        case 0x05: self = .startEncReq
        case 0x06: self = .startEncRsp
        case 0x07: self = .unknownRsp(unknownType: try r.u8())
        case 0x08: self = .featureReq(features: try r.u64())
        case 0x09: self = .featureRsp(features: try r.u64())
        case 0x0A: self = .pauseEncReq
        case 0x0B: self = .pauseEncRsp
        case 0x0C: self = .versionInd(version: try r.u8(), companyID: try r.u16(), subversion: try r.u16())
        case 0x0D: self = .rejectInd(errorCode: try r.u8())
        case 0x0E: self = .peripheralFeatureReq(features: try r.u64())
        case 0x0F: self = .connectionParamReq(try params())
        case 0x10: self = .connectionParamRsp(try params())
        case 0x11: self = .rejectExtInd(rejectOpcode: try r.u8(), errorCode: try r.u8())
        case 0x12: self = .pingReq
        case 0x13: self = .pingRsp
        case 0x14: self = .lengthReq(try length())
        case 0x15: self = .lengthRsp(try length())
        case 0x16: self = .phyReq(txPhys: try r.u8(), rxPhys: try r.u8())
        case 0x17: self = .phyRsp(txPhys: try r.u8(), rxPhys: try r.u8())
        case 0x18: self = .phyUpdateInd(centralToPeripheral: try r.u8(), peripheralToCentral: try r.u8(), instant: try r.u16())
        default: throw DecodeError("LL control PDU: unknown opcode 0x\(String(opcode, radix: 16))")
        }
        try r.expectEnd()
    }
}

/// A data physical channel PDU (Vol 6 Part B §2.4): 2-byte header, payload, and the 4-byte MIC
/// when the link is encrypted.
public struct DataPDU: Hashable, Sendable {
    public var llid: LLID
    public var nesn: Bool
    public var sn: Bool
    public var moreData: Bool
    public var payload: [UInt8]
    /// Present on encrypted links with a non-empty payload.
    public var mic: UInt32?

    public init(llid: LLID, nesn: Bool = false, sn: Bool = false, moreData: Bool = false, payload: [UInt8], mic: UInt32? = nil) {
        self.llid = llid
        self.nesn = nesn
        self.sn = sn
        self.moreData = moreData
        self.payload = payload
        self.mic = mic
    }

    public static func control(_ pdu: LLControlPDU) -> DataPDU { DataPDU(llid: .control, payload: pdu.encode()) }

    /// Length on the air in octets: header, payload and MIC.
    public var airOctets: Int { 2 + payload.count + (mic == nil ? 0 : 4) }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: payload.count + 6)
        w.u8(llid.rawValue | (nesn ? 0x04 : 0) | (sn ? 0x08 : 0) | (moreData ? 0x10 : 0))
        w.u8(UInt8(payload.count + (mic == nil ? 0 : 4)))
        w.bytes(payload)
        if let mic { w.u32(mic) }
        return w.bytes
    }

    /// Decodes a PDU; `encrypted` says whether the link's PDUs carry a MIC.
    public init(decoding bytes: [UInt8], encrypted: Bool) throws {
        var r = ByteReader(bytes, context: "data PDU")
        let h0 = try r.u8()
        guard let llid = LLID(rawValue: h0 & 0b11) else { throw DecodeError("data PDU: reserved LLID") }
        self.llid = llid
        nesn = h0 & 0x04 != 0
        sn = h0 & 0x08 != 0
        moreData = h0 & 0x10 != 0
        var length = Int(try r.u8())
        guard r.remaining == length else { throw DecodeError("data PDU: length \(length) but \(r.remaining) bytes") }
        if encrypted && length > 0 {
            // A MIC follows every non-empty payload, so an encrypted PDU is 0 or at least 5 octets.
            guard length > 4 else { throw DecodeError("data PDU: no room for MIC") }
            length -= 4
            payload = try r.bytes(length)
            mic = try r.u32()
        } else {
            payload = try r.bytes(length)
            mic = nil
        }
        guard payload.count <= 251 else { throw DecodeError("data PDU: payload longer than 251 octets") }
    }
}
