import ByteCoding
import HCI

/// Cuts an H4 byte stream (Core spec Vol 4 Part A §2) into HCI packets.
///
/// A stream may split packets anywhere, so bytes are fed in as they arrive with `append` and
/// complete packets are taken out with `nextPacket()`. Each packet's length is read from its
/// header: the header size depends on the packet type (command 3, ACL 4, SCO 3, event 2, ISO 4).
///
/// An unknown packet indicator means the stream lost its framing; nothing after it can be
/// trusted, so `nextPacket()` throws (and keeps throwing). Memory stays bounded: the buffer
/// holds at most one partial packet plus the last chunk appended, and declared lengths are never
/// used to reserve memory up front.
public struct H4Framer: Sendable {
    /// The largest frame H4 can carry: indicator, ACL header, and a 16-bit length of data.
    public static let maximumFrameLength = 1 + 4 + 0xFFFF

    // Bytes not yet consumed are `storage[start..<storage.count]`. Consumed bytes are dropped
    // (one memmove of the partial tail) when more bytes are appended, so nothing is allocated
    // per byte or per packet once the buffer has grown to its working size.
    private var storage: [UInt8]
    private var start = 0

    public init(initialCapacity: Int = 1024) {
        storage = []
        storage.reserveCapacity(initialCapacity)
    }

    /// Bytes received but not yet returned as packets.
    public var bufferedByteCount: Int { storage.count - start }

    /// The buffer's allocated size, for checking that memory stays bounded.
    public var storageCapacity: Int { storage.capacity }

    /// Adds bytes received from the stream.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compact()
        storage.append(contentsOf: bytes)
    }

    /// Adds bytes received from the stream.
    public mutating func append<Bytes: Collection>(contentsOf bytes: Bytes) where Bytes.Element == UInt8 {
        compact()
        storage.append(contentsOf: bytes)
    }

    /// Drops the bytes already returned as packets, keeping the partial packet after them.
    private mutating func compact() {
        guard start > 0 else { return }
        if start == storage.count {
            storage.removeAll(keepingCapacity: true)
        } else {
            storage.removeSubrange(0..<start)
        }
        start = 0
    }

    /// Size of the header that follows the indicator, and where its length field is.
    static func headerLength(ofType type: UInt8) -> Int? {
        switch HCIPacketType(rawValue: type) {
        case .command, .sco: 3
        case .acl, .iso: 4
        case .event: 2
        case nil: nil
        }
    }

    /// The body length (header + payload, no indicator) declared by a complete header at `at`.
    private func bodyLength(type: UInt8, headerAt at: Int) -> Int {
        switch HCIPacketType(rawValue: type) {
        case .command, .sco:
            // Opcode/handle (2), then an 8-bit length.
            3 + Int(storage[at + 2])
        case .event:
            // Event code, then an 8-bit length.
            2 + Int(storage[at + 1])
        case .acl:
            // Handle and flags (2), then a 16-bit length.
            4 + (Int(storage[at + 2]) | Int(storage[at + 3]) << 8)
        case .iso:
            // Handle and flags (2), then a 14-bit length; the top two bits are reserved.
            4 + ((Int(storage[at + 2]) | Int(storage[at + 3]) << 8) & 0x3FFF)
        case nil:
            0
        }
    }

    /// The next complete packet, or `nil` until more bytes arrive.
    ///
    /// - Throws: `DecodeError` when the next byte isn't a known H4 indicator (framing is lost)
    ///   or the packet doesn't decode.
    public mutating func nextPacket() throws -> HCIPacket? {
        let available = storage.count - start
        guard available > 0 else { return nil }
        let type = storage[start]
        guard let headerLength = Self.headerLength(ofType: type) else {
            throw DecodeError(
                "H4 framing lost: unknown packet indicator 0x\(String(type, radix: 16)) "
                    + "(expected 0x01 command, 0x02 ACL, 0x03 SCO, 0x04 event or 0x05 ISO)")
        }
        guard available >= 1 + headerLength else { return nil }
        let bodyLength = bodyLength(type: type, headerAt: start + 1)
        guard available >= 1 + bodyLength else { return nil }
        let bodyStart = start + 1
        let body = storage[bodyStart..<bodyStart + bodyLength]
        start = bodyStart + bodyLength
        return try HCIPacket(type: type, body: body)
    }

    /// Appends `bytes` and returns every packet they complete.
    public mutating func packets<Bytes: Collection>(from bytes: Bytes) throws -> [HCIPacket]
    where Bytes.Element == UInt8 {
        append(contentsOf: bytes)
        var packets: [HCIPacket] = []
        while let packet = try nextPacket() { packets.append(packet) }
        return packets
    }
}
