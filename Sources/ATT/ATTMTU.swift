/// ATT_MTU arithmetic (Core spec Vol 3 Part F §3.2.8, §3.4): how much of a value fits in each
/// PDU for a given MTU. Every function clamps at 0, so a nonsensical MTU never traps.
public enum ATTMTU {
    /// ATT_MTU on an LE bearer before (or without) an MTU exchange.
    public static let leDefault = 23
    /// The largest attribute value (§3.2.9); an MTU of 517 carries one in a single write.
    public static let maximumAttributeValueLength = 512
    /// What we offer by default: enough for a 512-octet value in one Read or Write PDU.
    public static let preferred = 517

    /// ATT_MTU after an exchange: the smaller of the two Rx MTUs, and the default if either
    /// side offered less than the default (§3.4.2.2).
    public static func negotiated(clientRxMTU: UInt16, serverRxMTU: UInt16) -> Int {
        let smaller = Int(min(clientRxMTU, serverRxMTU))
        return smaller < leDefault ? leDefault : smaller
    }

    /// Read, Read Blob and Read Multiple (Variable) Response payloads: ATT_MTU − 1.
    public static func maximumReadValueLength(mtu: Int) -> Int { max(0, mtu - 1) }
    /// Write Request and Write Command values: ATT_MTU − 3.
    public static func maximumWriteValueLength(mtu: Int) -> Int { max(0, mtu - 3) }
    /// Handle Value Notification and Indication values: ATT_MTU − 3.
    public static func maximumNotificationValueLength(mtu: Int) -> Int { max(0, mtu - 3) }
    /// Prepare Write Request and Response part values: ATT_MTU − 5.
    public static func maximumPrepareWriteValueLength(mtu: Int) -> Int { max(0, mtu - 5) }
    /// Signed Write Command values: ATT_MTU − 15 (12 octets of signature).
    public static func maximumSignedWriteValueLength(mtu: Int) -> Int { max(0, mtu - 15) }
    /// Find By Type Value Request values: ATT_MTU − 7.
    public static func maximumFindByTypeValueLength(mtu: Int) -> Int { max(0, mtu - 7) }
    /// One value in a Read By Type Response: ATT_MTU − 4 or 253, whichever is smaller.
    public static func maximumReadByTypeValueLength(mtu: Int) -> Int {
        max(0, min(ATTPDU.ReadByTypeResponse.maximumValueLength, mtu - 4))
    }
    /// One value in a Read By Group Type Response: ATT_MTU − 6 or 251, whichever is smaller.
    public static func maximumReadByGroupTypeValueLength(mtu: Int) -> Int {
        max(0, min(ATTPDU.ReadByGroupTypeResponse.maximumValueLength, mtu - 6))
    }
}

// Response builders for a server: each packs candidates (in handle order) into one response
// that fits `mtu`, keeping the list uniform as the PDU requires. They return nil when nothing
// fits (no candidates): the server then answers Attribute Not Found.

extension ATTPDU.ReadByTypeResponse {
    /// Takes candidates while their values have the first one's length, each value cut to
    /// `ATTMTU.maximumReadByTypeValueLength(mtu:)` (a client reads the rest with Read Blob), and
    /// while the pairs fit in ATT_MTU − 2 octets.
    public static func packing(_ candidates: some Sequence<AttributeData>, mtu: Int) -> Self? {
        let cap = ATTMTU.maximumReadByTypeValueLength(mtu: mtu)
        return packUniform(candidates, room: mtu - 2, fixedSize: 2, cap: cap, valueLength: { $0.value.count }) {
            AttributeData(handle: $0.handle, value: Array($0.value.prefix(cap)))
        }.flatMap { Self(attributeData: $0) }
    }
}

extension ATTPDU.ReadByGroupTypeResponse {
    /// Takes candidates while their values have the first one's length, each value cut to
    /// `ATTMTU.maximumReadByGroupTypeValueLength(mtu:)`, and while they fit in ATT_MTU − 2 octets.
    public static func packing(_ candidates: some Sequence<AttributeData>, mtu: Int) -> Self? {
        let cap = ATTMTU.maximumReadByGroupTypeValueLength(mtu: mtu)
        return packUniform(candidates, room: mtu - 2, fixedSize: 4, cap: cap, valueLength: { $0.value.count }) {
            AttributeData(handle: $0.handle, endGroupHandle: $0.endGroupHandle, value: Array($0.value.prefix(cap)))
        }.flatMap { Self(attributeData: $0) }
    }
}

extension ATTPDU.FindInformationResponse {
    /// Takes candidates while their types have the first one's shortest format (16-bit or
    /// 128-bit) and while they fit in ATT_MTU − 2 octets.
    public static func packing(_ candidates: some Sequence<Entry>, mtu: Int) -> Self? {
        guard let first = candidates.first(where: { _ in true }) else { return nil }
        let format = ATTUUIDFormat.shortest(for: first.type)
        return packUniform(candidates, room: mtu - 2, fixedSize: 2, cap: 16,
                           valueLength: { ATTUUIDFormat.shortest(for: $0.type).byteCount }, { $0 })
            .flatMap { Self(format: format, entries: $0) }
    }
}

extension ATTPDU.FindByTypeValueResponse {
    /// Takes as many candidates as fit in ATT_MTU − 1 octets.
    public static func packing(_ candidates: some Sequence<HandlesInformation>, mtu: Int) -> Self? {
        let list = Array(candidates.prefix(max(0, (mtu - 1) / 4)))
        return list.isEmpty ? nil : Self(handlesInformation: list)
    }
}

/// The common rule of the list responses: every element is `fixedSize` octets plus a value
/// whose length (before capping at `cap`) equals the first element's; stop at the first that
/// differs or no longer fits in `room`. Comparing uncapped lengths keeps a cut value from
/// sitting next to a whole one of the capped length, which a client could not tell apart.
private func packUniform<Candidate, Element>(
    _ candidates: some Sequence<Candidate>, room: Int, fixedSize: Int, cap: Int,
    valueLength: (Candidate) -> Int, _ element: (Candidate) -> Element
) -> [Element]? {
    var packed: [Element] = []
    var used = 0
    var firstLength: Int?
    for candidate in candidates {
        let length = valueLength(candidate)
        if let firstLength, length != firstLength { break }
        firstLength = length
        let size = fixedSize + min(length, cap)
        guard used + size <= room else { break }
        used += size
        packed.append(element(candidate))
    }
    return packed.isEmpty ? nil : packed
}
