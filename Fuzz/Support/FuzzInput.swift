// Shared by every harness (compiled into each one): the input as a stream of small choices
// and length-prefixed records, so that one input plays a whole conversation with a peer.

/// libFuzzer's input, read front to back. Running out gives zeros and empty records, so every
/// byte string is a valid script.
struct FuzzInput {
    let bytes: [UInt8]
    private(set) var position = 0

    init(_ data: UnsafePointer<UInt8>, _ size: Int) {
        bytes = Array(UnsafeBufferPointer(start: data, count: size))
    }

    var isEmpty: Bool { position >= bytes.count }

    mutating func u8() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u16() -> UInt16 { UInt16(u8()) | UInt16(u8()) << 8 }

    mutating func bool() -> Bool { u8() & 1 == 1 }

    /// Up to `count` bytes.
    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, position + max(0, count))
        defer { position = end }
        return Array(bytes[position..<end])
    }

    /// A record: one length byte, then that many bytes.
    mutating func record() -> [UInt8] { take(Int(u8())) }

    /// Everything not read yet.
    mutating func rest() -> [UInt8] { take(bytes.count - position) }
}
