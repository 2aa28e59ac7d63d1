import ByteCoding

/// Why bytes from a client or the daemon are not a message of the protocol. The side that
/// reads them ends that connection (and only that one).
public enum DaemonProtocolError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The length field announced more than ``DaemonFrame/maximumLength`` bytes, or fewer than
    /// a type needs.
    case badLength(UInt32)
    case unknownKind(UInt16)
    /// A field did not decode (`kind` nil: not even the type).
    case malformed(kind: DaemonMessage.Kind?, String)
    /// The fields ended before the frame did.
    case trailingBytes(kind: DaemonMessage.Kind, count: Int)

    public var description: String {
        switch self {
        case .badLength(let length): "a frame of \(length) bytes (2 to \(DaemonFrame.maximumLength) allowed)"
        case .unknownKind(let kind): "unknown message type 0x\(String(kind, radix: 16))"
        case .malformed(let kind, let why): "malformed \(kind.map { "\($0)" } ?? "message"): \(why)"
        case .trailingBytes(let kind, let count): "\(count) bytes after the fields of \(kind)"
        }
    }
}

/// The protocol's framing (docs/daemon.md, "Frame"): a little-endian u32 length of what
/// follows, then the message's type and fields.
public enum DaemonFrame {
    /// The protocol version this build speaks (docs/daemon.md).
    public static let version: UInt16 = 3
    /// The oldest version it still speaks.
    public static let minimumVersion: UInt16 = 1
    /// Bytes of one channel's data either side may have sent that the other has not counted
    /// yet (`channelSent`, `channelConsumed`): what a channel can make the other side hold.
    public static let channelWindow = 32 * 1024
    /// The longest payload a frame may announce: far above any message (a value is at most
    /// 512 bytes, a database's discovery a few KiB), low enough that a hostile length cannot
    /// make the reader hold much.
    public static let maximumLength = 1 << 20

    /// `message` as one frame, ready to write.
    public static func encode(_ message: DaemonMessage) -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        w.u32(0)
        message.encode(into: &w)
        var bytes = w.bytes
        let length = UInt32(bytes.count - 4)
        for i in 0..<4 { bytes[i] = UInt8(truncatingIfNeeded: length >> (8 * UInt32(i))) }
        return bytes
    }
}

/// Cuts a byte stream into messages as it arrives (a socket's reads end anywhere in a frame).
///
/// After it threw, the stream is not in the protocol any more: the reader stays failed, and
/// its owner closes the connection.
public struct DaemonFrameReader: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0
    public private(set) var failure: DaemonProtocolError?

    public init() {}

    /// Bytes held waiting for the rest of their frame.
    public var bufferedCount: Int { buffer.count - start }

    /// Bytes read from the stream (dropped once the reader failed: nothing will read them).
    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        guard failure == nil else { return }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole message, or nil until more bytes arrive.
    public mutating func next() throws(DaemonProtocolError) -> DaemonMessage? {
        if let failure { throw failure }
        guard buffer.count - start >= 4 else { return compact() }
        let length = UInt32(buffer[start]) | UInt32(buffer[start + 1]) << 8 | UInt32(buffer[start + 2]) << 16
            | UInt32(buffer[start + 3]) << 24
        guard length >= 2, length <= UInt32(DaemonFrame.maximumLength) else { return try fail(.badLength(length)) }
        let end = start + 4 + Int(length)
        guard buffer.count >= end else { return compact() }
        let payload = buffer[(start + 4)..<end]
        start = end
        do {
            return try DaemonMessage.decode(payload)
        } catch {
            return try fail(error)
        }
    }

    private mutating func fail(_ error: DaemonProtocolError) throws(DaemonProtocolError) -> DaemonMessage? {
        failure = error
        buffer = []
        start = 0
        throw error
    }

    /// Drops consumed bytes once they are most of the buffer (amortised, never per frame).
    private mutating func compact() -> DaemonMessage? {
        if start > 0, start >= buffer.count / 2 {
            buffer.removeFirst(start)
            start = 0
        }
        return nil
    }
}
