import ByteCoding

/// Channel identifiers on an LE-U logical link (Core spec Vol 3 Part A §2.1).
public enum L2CAPChannelID {
    public static let att: UInt16 = 0x0004
    public static let leSignaling: UInt16 = 0x0005
    public static let securityManager: UInt16 = 0x0006
    /// Dynamically allocated CIDs for credit-based channels.
    public static let dynamicRange: ClosedRange<UInt16> = 0x0040...0x007F
}

/// A B-frame: the basic L2CAP header (length, channel ID) and its payload (Vol 3 Part A §3.1).
public struct BasicFrame: Hashable, Sendable {
    public var channelID: UInt16
    public var payload: [UInt8]

    public init(channelID: UInt16, payload: [UInt8]) {
        self.channelID = channelID
        self.payload = payload
    }

    public func encode() -> [UInt8] {
        var w = ByteWriter(capacity: payload.count + 4)
        w.u16(UInt16(payload.count))
        w.u16(channelID)
        w.bytes(payload)
        return w.bytes
    }

    /// Decodes a whole PDU as the HCI driver reassembled it; the length field must match.
    /// Consumed: the payload is the PDU's own buffer with the header taken off in place (no
    /// allocation when the caller hands over the only reference, as the receive path does).
    public init(decoding pdu: consuming [UInt8]) throws {
        // Read in place (every PDU of every link comes through here).
        let context = "L2CAP basic frame"
        guard pdu.count >= 2 else { throw DecodeError.truncated(context, needed: 2, available: pdu.count) }
        guard pdu.count >= 4 else { throw DecodeError.truncated(context, needed: 2, available: pdu.count - 2) }
        let length = Int(pdu[0]) | Int(pdu[1]) << 8
        channelID = UInt16(pdu[2]) | UInt16(pdu[3]) << 8
        guard pdu.count - 4 == length else {
            throw DecodeError("L2CAP basic frame: length field \(length) but \(pdu.count - 4) payload bytes")
        }
        pdu.removeFirst(4)
        payload = pdu
    }

    /// The payload, moved out of the frame (its buffer's only reference stays the only one).
    public consuming func takePayload() -> [UInt8] { payload }
}
