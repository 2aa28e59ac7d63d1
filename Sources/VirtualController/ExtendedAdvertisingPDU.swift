import ByteCoding
import HCI

/// AdvMode of the common extended advertising payload (Core spec Vol 6 Part B §2.3.4.1).
public enum AdvertisingMode: UInt8, Hashable, Sendable {
    case nonConnectableNonScannable = 0b00
    case connectable = 0b01
    case scannable = 0b10
}

/// ADI, the Advertising Data Info field (Vol 6 Part B §2.3.4.6): which advertising set (SID)
/// and which version of its data (DID) a PDU carries.
public struct AdvertisingDataInfo: Hashable, Sendable {
    /// Advertising Data ID, 12 bits: changes whenever the host changes the set's data.
    public var did: UInt16
    /// Advertising Set ID, 4 bits.
    public var sid: UInt8

    public init(did: UInt16, sid: UInt8) {
        self.did = did & 0x0FFF
        self.sid = sid & 0x0F
    }

    /// DID in bits 0–11, SID in bits 12–15.
    var rawValue: UInt16 { did | UInt16(sid) << 12 }
    init(rawValue: UInt16) { self.init(did: rawValue & 0x0FFF, sid: UInt8(rawValue >> 12)) }
}

/// AuxPtr (Vol 6 Part B §2.3.4.5): where and when the next auxiliary PDU of the event is sent.
public struct AuxiliaryPointer: Hashable, Sendable {
    /// Secondary advertising channel index, 0–36.
    public var channelIndex: UInt8
    /// CA: the advertiser's sleep clock accuracy is 0–50 ppm (true) or 51–500 ppm (false).
    public var clockAccuracy50ppm: Bool
    /// Offset Units: 300 µs (true) or 30 µs (false).
    public var offsetUnits300us: Bool
    /// AUX Offset, 13 bits, in Offset Units.
    public var auxOffset: UInt16
    public var auxPHY: LEPHY

    public init(channelIndex: UInt8, clockAccuracy50ppm: Bool = true, offsetUnits300us: Bool, auxOffset: UInt16, auxPHY: LEPHY) {
        self.channelIndex = channelIndex & 0x3F
        self.clockAccuracy50ppm = clockAccuracy50ppm
        self.offsetUnits300us = offsetUnits300us
        self.auxOffset = auxOffset & 0x1FFF
        self.auxPHY = auxPHY
    }

    /// A pointer to a packet starting no earlier than `microseconds` after the start of the
    /// packet holding the pointer: rounded up to 30 µs units, or 300 µs units when 13 bits of
    /// 30 µs (245.73 ms) are not enough.
    public init(channelIndex: UInt8, offsetAtLeastMicroseconds microseconds: Int, auxPHY: LEPHY) {
        let units30 = (microseconds + 29) / 30
        if units30 <= 0x1FFF {
            self.init(channelIndex: channelIndex, offsetUnits300us: false, auxOffset: UInt16(units30), auxPHY: auxPHY)
        } else {
            self.init(channelIndex: channelIndex, offsetUnits300us: true,
                      auxOffset: UInt16(min((microseconds + 299) / 300, 0x1FFF)), auxPHY: auxPHY)
        }
    }

    /// The offset in microseconds.
    public var offsetMicroseconds: Int { Int(auxOffset) * (offsetUnits300us ? 300 : 30) }

    /// AUX PHY codes: 0 LE 1M, 1 LE 2M, 2 LE Coded; the rest are reserved.
    private var phyCode: UInt32 { UInt32(auxPHY.rawValue - 1) }

    func encode(into w: inout ByteWriter) {
        w.u24(UInt32(channelIndex) | (clockAccuracy50ppm ? 1 << 6 : 0) | (offsetUnits300us ? 1 << 7 : 0)
              | UInt32(auxOffset) << 8 | phyCode << 21)
    }

    init(decoding r: inout ByteReader) throws {
        let v = try r.u24()
        guard let phy = LEPHY(rawValue: UInt8(v >> 21) + 1) else {
            throw DecodeError("\(r.context): reserved AUX PHY \(v >> 21)")
        }
        self.init(channelIndex: UInt8(v & 0x3F), clockAccuracy50ppm: v & 1 << 6 != 0, offsetUnits300us: v & 1 << 7 != 0,
                  auxOffset: UInt16((v >> 8) & 0x1FFF), auxPHY: phy)
    }
}

/// The Common Extended Advertising Payload Format (Vol 6 Part B §2.3.4): extended header length
/// and AdvMode, the extended header (flags, then the fields they announce, in order), AdvData.
public struct ExtendedAdvertisingPayload: Hashable, Sendable {
    public var mode: AdvertisingMode
    public var advA: LEAddress?
    public var targetA: LEAddress?
    /// CTEInfo, kept as received (this link layer sends no constant tone extensions).
    public var cteInfo: UInt8?
    public var adi: AdvertisingDataInfo?
    public var auxPtr: AuxiliaryPointer?
    /// SyncInfo (18 octets), kept as received (no periodic advertising here).
    public var syncInfo: [UInt8]?
    public var txPower: Int8?
    /// Additional Controller Advertising Data: the rest of the extended header.
    public var acad: [UInt8]
    public var advData: [UInt8]

    public init(mode: AdvertisingMode = .nonConnectableNonScannable, advA: LEAddress? = nil, targetA: LEAddress? = nil,
                cteInfo: UInt8? = nil, adi: AdvertisingDataInfo? = nil, auxPtr: AuxiliaryPointer? = nil,
                syncInfo: [UInt8]? = nil, txPower: Int8? = nil, acad: [UInt8] = [], advData: [UInt8] = []) {
        self.mode = mode
        self.advA = advA
        self.targetA = targetA
        self.cteInfo = cteInfo
        self.adi = adi
        self.auxPtr = auxPtr
        self.syncInfo = syncInfo
        self.txPower = txPower
        self.acad = acad
        self.advData = advData
    }

    /// The most payload octets a PDU carries (the Length field of the header).
    public static let maxLength = 255
    static let syncInfoLength = 18

    /// Extended header octets: flags plus fields, or nothing when there is no field.
    public var extendedHeaderLength: Int {
        var n = (advA != nil ? 6 : 0) + (targetA != nil ? 6 : 0) + (cteInfo != nil ? 1 : 0) + (adi != nil ? 2 : 0)
        n += (auxPtr != nil ? 3 : 0) + (syncInfo != nil ? Self.syncInfoLength : 0) + (txPower != nil ? 1 : 0) + acad.count
        return n == 0 ? 0 : n + 1
    }

    /// Octets of payload: the extended header length/AdvMode octet, the extended header, AdvData.
    public var length: Int { 1 + extendedHeaderLength + advData.count }

    /// How much AdvData fits beside this extended header (with an AuxPtr if one is counted in).
    var advDataCapacity: Int { Self.maxLength - 1 - extendedHeaderLength }

    func encode(into w: inout ByteWriter) {
        let headerLength = extendedHeaderLength
        w.u8(UInt8(headerLength) | mode.rawValue << 6)
        if headerLength > 0 {
            var flags: UInt8 = 0
            if advA != nil { flags |= 1 << 0 }
            if targetA != nil { flags |= 1 << 1 }
            if cteInfo != nil { flags |= 1 << 2 }
            if adi != nil { flags |= 1 << 3 }
            if auxPtr != nil { flags |= 1 << 4 }
            if syncInfo != nil { flags |= 1 << 5 }
            if txPower != nil { flags |= 1 << 6 }
            w.u8(flags)
            if let advA { w.address(advA.address) }
            if let targetA { w.address(targetA.address) }
            if let cteInfo { w.u8(cteInfo) }
            if let adi { w.u16(adi.rawValue) }
            if let auxPtr { auxPtr.encode(into: &w) }
            if let syncInfo { w.bytes(syncInfo) }
            if let txPower { w.i8(txPower) }
            w.bytes(acad)
        }
        w.bytes(advData)
    }

    /// Decodes a payload; TxAdd and RxAdd from the PDU header give the address types.
    init(decoding r: inout ByteReader, txAdd: Bool, rxAdd: Bool) throws {
        let first = try r.u8()
        let headerLength = Int(first & 0x3F)
        guard let mode = AdvertisingMode(rawValue: first >> 6) else {
            throw DecodeError("\(r.context): reserved AdvMode 0b11")
        }
        self.init(mode: mode)
        guard headerLength <= r.remaining else {
            throw DecodeError.truncated(r.context, needed: headerLength, available: r.remaining)
        }
        if headerLength > 0 {
            var h = ByteReader(try r.slice(headerLength), context: r.context)
            let flags = try h.u8()
            guard flags & 0x80 == 0 else { throw DecodeError("\(r.context): reserved extended header flag") }
            if flags & 1 << 0 != 0 { advA = LEAddress(txAdd ? .randomDevice : .publicDevice, try h.address()) }
            if flags & 1 << 1 != 0 { targetA = LEAddress(rxAdd ? .randomDevice : .publicDevice, try h.address()) }
            if flags & 1 << 2 != 0 { cteInfo = try h.u8() }
            if flags & 1 << 3 != 0 { adi = AdvertisingDataInfo(rawValue: try h.u16()) }
            if flags & 1 << 4 != 0 { auxPtr = try AuxiliaryPointer(decoding: &h) }
            if flags & 1 << 5 != 0 { syncInfo = try h.bytes(Self.syncInfoLength) }
            if flags & 1 << 6 != 0 { txPower = try h.i8() }
            acad = h.rest()
        }
        advData = r.rest()
    }
}

/// The PDUs of extended advertising (Vol 6 Part B §2.3): ADV_EXT_IND on the primary advertising
/// channels, the auxiliary PDUs on the secondary ones.
///
/// Several share a PDU type on the air (ADV_EXT_IND, AUX_ADV_IND, AUX_SCAN_RSP and
/// AUX_CHAIN_IND are all 0b0111; AUX_SCAN_REQ and AUX_CONNECT_REQ reuse SCAN_REQ's and
/// CONNECT_IND's): a receiver tells them apart by the channel and by what it is waiting for,
/// which is why decoding takes the expected `Kind`.
public enum ExtendedAdvertisingPDU: Hashable, Sendable {
    case advExtInd(ExtendedAdvertisingPayload)
    case auxAdvInd(ExtendedAdvertisingPayload)
    case auxScanReq(scanA: LEAddress, advA: LEAddress)
    case auxScanRsp(ExtendedAdvertisingPayload)
    case auxChainInd(ExtendedAdvertisingPayload)
    case auxConnectReq(initA: LEAddress, advA: LEAddress, llData: ConnectLLData)
    case auxConnectRsp(ExtendedAdvertisingPayload)

    public enum Kind: Hashable, Sendable, CaseIterable {
        case advExtInd, auxAdvInd, auxScanReq, auxScanRsp, auxChainInd, auxConnectReq, auxConnectRsp

        var pduType: UInt8 {
            switch self {
            case .advExtInd, .auxAdvInd, .auxScanRsp, .auxChainInd: 0b0111
            case .auxScanReq: 0b0011
            case .auxConnectReq: 0b0101
            case .auxConnectRsp: 0b1000
            }
        }
    }

    public var kind: Kind {
        switch self {
        case .advExtInd: .advExtInd
        case .auxAdvInd: .auxAdvInd
        case .auxScanReq: .auxScanReq
        case .auxScanRsp: .auxScanRsp
        case .auxChainInd: .auxChainInd
        case .auxConnectReq: .auxConnectReq
        case .auxConnectRsp: .auxConnectRsp
        }
    }

    /// The payload of the PDUs in the common extended advertising format.
    public var payload: ExtendedAdvertisingPayload? {
        switch self {
        case .advExtInd(let p), .auxAdvInd(let p), .auxScanRsp(let p), .auxChainInd(let p), .auxConnectRsp(let p): p
        case .auxScanReq, .auxConnectReq: nil
        }
    }

    /// The same bytes as the legacy PDU a request reuses.
    private var legacyForm: AdvertisingPDU? {
        switch self {
        case .auxScanReq(let s, let a): .scanReq(scanA: s, advA: a)
        case .auxConnectReq(let i, let a, let ll): .connectInd(initA: i, advA: a, llData: ll)
        default: nil
        }
    }

    /// Header + payload octets.
    public var airOctets: Int {
        if let payload { return 2 + payload.length }
        if case .auxScanReq = self { return 2 + 12 }
        return 2 + 34
    }

    public func encode() -> [UInt8] {
        if let legacyForm { return legacyForm.encode() }
        guard let payload else { return [] }
        var w = ByteWriter(capacity: 2 + payload.length)
        // TxAdd describes AdvA, RxAdd TargetA; ChSel is 0 for these PDU types.
        w.u8(kind.pduType | (payload.advA?.isRandom == true ? 0x40 : 0) | (payload.targetA?.isRandom == true ? 0x80 : 0))
        w.u8(UInt8(truncatingIfNeeded: payload.length))
        payload.encode(into: &w)
        return w.bytes
    }

    /// Decodes a PDU known (by channel and timing) to be of `kind`.
    public init(decoding bytes: [UInt8], as kind: Kind) throws {
        switch kind {
        case .auxScanReq, .auxConnectReq:
            switch try AdvertisingPDU(decoding: bytes) {
            case .scanReq(let s, let a) where kind == .auxScanReq: self = .auxScanReq(scanA: s, advA: a)
            case .connectInd(let i, let a, let ll) where kind == .auxConnectReq: self = .auxConnectReq(initA: i, advA: a, llData: ll)
            default: throw DecodeError("extended advertising PDU: not a \(kind)")
            }
            return
        default:
            break
        }
        var r = ByteReader(bytes, context: "\(kind)")
        let h0 = try r.u8()
        guard h0 & 0x0F == kind.pduType else {
            throw DecodeError("\(kind): PDU type \(h0 & 0x0F), expected \(kind.pduType)")
        }
        let length = Int(try r.u8())
        guard r.remaining == length, length >= 1 else { throw DecodeError("\(kind): length \(length) but \(r.remaining) bytes") }
        let payload = try ExtendedAdvertisingPayload(decoding: &r, txAdd: h0 & 0x40 != 0, rxAdd: h0 & 0x80 != 0)
        switch kind {
        case .advExtInd: self = .advExtInd(payload)
        case .auxAdvInd: self = .auxAdvInd(payload)
        case .auxScanRsp: self = .auxScanRsp(payload)
        case .auxChainInd: self = .auxChainInd(payload)
        case .auxConnectRsp: self = .auxConnectRsp(payload)
        case .auxScanReq, .auxConnectReq: throw DecodeError("\(kind): not a common extended advertising payload")
        }
    }
}
