import ByteCoding
import Foundation
import Glibc
import HCI
import Scheduling

/// The btsnoop capture format (RFC 1761 "snoop" with Bluetooth datalinks), as read by Wireshark,
/// tshark and btmon. All fields are big-endian. We write datalink 1002, "HCI UART (H4)": each
/// record's data is an H4 frame, indicator byte first.
public enum Btsnoop {
    /// "btsnoop\0".
    public static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let version: UInt32 = 1
    public static let datalinkH4: UInt32 = 1002
    /// Magic, version, datalink.
    public static let fileHeaderLength = 16
    /// Original length, included length, flags, cumulative drops, timestamp.
    public static let recordHeaderLength = 24
    /// Timestamps count microseconds from midnight, January 1st of year 0 (AD);
    /// this is the Unix epoch on that scale.
    public static let unixEpochMicroseconds: Int64 = 0x00DC_DDB3_0F2F_8000

    /// Who sent a recorded packet, as seen from the host.
    public enum Direction: Sendable, Hashable {
        /// Host to controller (commands, outgoing ACL).
        case sent
        /// Controller to host (events, incoming ACL).
        case received
    }

    /// Record flags: bit 0 set when received by the host; bit 1 set for commands and events
    /// (clear for data).
    public static func flags(direction: Direction, packetType: UInt8) -> UInt32 {
        let received: UInt32 = direction == .received ? 1 : 0
        let control: UInt32 =
            packetType == HCIPacketType.command.rawValue || packetType == HCIPacketType.event.rawValue ? 2 : 0
        return received | control
    }

    /// The file header bytes.
    public static var fileHeader: [UInt8] {
        var bytes = magic
        appendBigEndian(version, to: &bytes)
        appendBigEndian(datalinkH4, to: &bytes)
        return bytes
    }

    /// One record: header then the H4 frame.
    public static func record(h4Frame: [UInt8], direction: Direction, unixMicroseconds: Int64,
                              cumulativeDrops: UInt32 = 0) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(recordHeaderLength + h4Frame.count)
        appendRecord(h4Frame: h4Frame, direction: direction, unixMicroseconds: unixMicroseconds,
                     cumulativeDrops: cumulativeDrops, to: &bytes)
        return bytes
    }

    /// Appends one record to `bytes`.
    static func appendRecord(h4Frame: [UInt8], direction: Direction, unixMicroseconds: Int64,
                             cumulativeDrops: UInt32, to bytes: inout [UInt8]) {
        appendBigEndian(UInt32(h4Frame.count), to: &bytes)  // original length
        appendBigEndian(UInt32(h4Frame.count), to: &bytes)  // included length
        appendBigEndian(flags(direction: direction, packetType: h4Frame.first ?? 0), to: &bytes)
        appendBigEndian(cumulativeDrops, to: &bytes)
        appendBigEndian(UInt64(bitPattern: unixMicroseconds &+ unixEpochMicroseconds), to: &bytes)
        bytes.append(contentsOf: h4Frame)
    }

    static func appendBigEndian<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) }
    }

    /// Microseconds since the Unix epoch, from the wall clock.
    public static func nowUnixMicroseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000 + Int64(now.tv_nsec) / 1000
    }
}

/// Appends packets to a btsnoop file. Thread-safe, and never waits on the disk: `write` adds the
/// record to a buffer in memory, and a background queue writes what has gathered, in order, with
/// one `write(2)` per batch (whole records only, so the file is readable at any moment up to
/// its last batch). `flush()` waits for everything recorded so far to be in the file; `close()`
/// flushes and closes it, as does the end of the process (`exit`) for writers still open.
///
/// If the disk falls behind by more than `bufferLimit` bytes, records are dropped and the next
/// record written counts them (its cumulative drops field) rather than memory growing.
public final class BtsnoopWriter: Sendable {
    public let path: String
    /// The most bytes waiting for the disk before records are dropped.
    public let bufferLimit: Int

    private struct State {
        /// The descriptor, or -1 once closed.
        var fd: Int32
        /// Records waiting for the background queue.
        var pending: [UInt8] = []
        /// Whether a write of `pending` is queued on `disk`.
        var scheduled = false
        var drops: UInt32 = 0
    }

    // A pthread mutex (`Locked`), which the thread sanitizer models.
    private let state: Locked<State>
    /// Writes batches in the order they were recorded.
    private let disk: DispatchQueue

    /// Creates (or truncates) the file at `path` and writes the file header.
    public init(path: String, bufferLimit: Int = 16 << 20) throws {
        self.path = path
        self.bufferLimit = bufferLimit
        let descriptor = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw POSIX.error("btsnoop \(path): open") }
        state = Locked(State(fd: descriptor))
        disk = DispatchQueue(label: "btsnoop \(path)")
        do {
            try Self.writeWhole(Btsnoop.fileHeader, to: descriptor, path: path)
        } catch {
            Glibc.close(descriptor)
            throw error
        }
        OpenWriters.add(self)
    }

    deinit {
        // No write is queued (a queued write holds the writer), and this may run on `disk`
        // itself (a write's block held the last reference): close without the queue.
        closeFile()
        OpenWriters.remove(self)
    }

    /// Records an H4 packet. `unixMicroseconds` defaults to the wall clock. Write errors are
    /// ignored: losing the capture must not break the transport being captured.
    public func write(_ packet: HCIPacket, direction: Btsnoop.Direction, unixMicroseconds: Int64? = nil) {
        write(h4Frame: packet.h4Bytes, direction: direction, unixMicroseconds: unixMicroseconds)
    }

    /// Records an H4 frame as bytes (indicator byte first).
    public func write(h4Frame: [UInt8], direction: Btsnoop.Direction, unixMicroseconds: Int64? = nil) {
        let time = unixMicroseconds ?? Btsnoop.nowUnixMicroseconds()
        let schedule = state.withLock { state -> Bool in
            guard state.fd >= 0 else { return false }
            guard state.pending.count + Btsnoop.recordHeaderLength + h4Frame.count <= bufferLimit else {
                state.drops &+= 1
                return false
            }
            Btsnoop.appendRecord(h4Frame: h4Frame, direction: direction, unixMicroseconds: time,
                                 cumulativeDrops: state.drops, to: &state.pending)
            if state.scheduled { return false }
            state.scheduled = true
            return true
        }
        if schedule { disk.async { self.writePending() } }
    }

    /// Waits until every record written so far is in the file.
    public func flush() {
        disk.sync { writePending() }
    }

    /// Flushes and closes the file; later writes are ignored.
    public func close() {
        disk.sync { closeFile() }
        OpenWriters.remove(self)
    }

    /// Writes what is left and closes the descriptor. On `disk`, or once nothing else can.
    private func closeFile() {
        writePending()
        state.withLock { state in
            if state.fd >= 0 { Glibc.close(state.fd) }
            state.fd = -1
            state.pending = []
        }
    }

    /// On `disk`: writes what gathered, as one batch.
    private func writePending() {
        let (batch, fd) = state.withLock { state -> ([UInt8], Int32) in
            state.scheduled = false
            var batch: [UInt8] = []
            swap(&batch, &state.pending)
            return (batch, state.fd)
        }
        guard fd >= 0, !batch.isEmpty else { return }
        // Only this queue writes or closes the descriptor.
        try? Self.writeWhole(batch, to: fd, path: path)
    }

    private static func writeWhole(_ bytes: [UInt8], to descriptor: Int32, path: String) throws {
        try bytes.withUnsafeBytes { buffer in
            var offset = 0
            // A regular file takes the whole batch in one write; the loop covers signals and
            // a full disk's short writes.
            while offset < buffer.count {
                let written = Glibc.write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw POSIX.error("btsnoop \(path): write")
                }
                offset += written
            }
        }
    }
}

/// The writers still open, flushed when the process exits so that a capture is complete
/// whichever way the program ends (short of being killed).
private enum OpenWriters {
    private struct Entry: Sendable { weak var writer: BtsnoopWriter? }
    private static let writers = Locked<[ObjectIdentifier: Entry]>([:])
    private static let registerExitHook: Void = { atexit { OpenWriters.flushAll() } }()

    static func add(_ writer: BtsnoopWriter) {
        registerExitHook
        writers.withLock { $0[ObjectIdentifier(writer)] = Entry(writer: writer) }
    }

    static func remove(_ writer: BtsnoopWriter) {
        _ = writers.withLock { $0.removeValue(forKey: ObjectIdentifier(writer)) }
    }

    static func flushAll() {
        let open = writers.withLock { $0.values.compactMap(\.writer) }
        for writer in open { writer.flush() }
    }
}

/// One packet record of a btsnoop file.
public struct BtsnoopRecord: Hashable, Sendable {
    public var originalLength: UInt32
    public var flags: UInt32
    public var cumulativeDrops: UInt32
    /// Microseconds since midnight, January 1st of year 0.
    public var timestamp: UInt64
    /// The included bytes: an H4 frame for datalink 1002.
    public var data: [UInt8]

    public var direction: Btsnoop.Direction { flags & 1 == 1 ? .received : .sent }
    public var isCommandOrEvent: Bool { flags & 2 != 0 }
    public var unixMicroseconds: Int64 { Int64(bitPattern: timestamp) &- Btsnoop.unixEpochMicroseconds }

    /// The recorded packet, for H4 captures.
    public func packet() throws -> HCIPacket { try HCIPacket(h4: data) }
}

/// Reads a btsnoop file. A record cut short at the end (a capture whose writer was killed)
/// ends the list; a bad file header throws.
public struct BtsnoopReader: Sendable {
    public var version: UInt32
    public var datalink: UInt32
    public var records: [BtsnoopRecord]
    /// Bytes at the end that didn't make a whole record.
    public var truncatedTailLength: Int

    public init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw HCITransportError("btsnoop \(path): can't read file")
        }
        try self.init(bytes: [UInt8](data))
    }

    public init(bytes: [UInt8]) throws {
        var reader = BigEndianReader(bytes: bytes)
        guard let magic = reader.bytes(8), magic == Btsnoop.magic,
              let version = reader.u32(), let datalink = reader.u32()
        else { throw DecodeError("btsnoop: missing or bad file header") }
        self.version = version
        self.datalink = datalink
        records = []
        while reader.remaining > 0 {
            let recordStart = reader.offset
            guard let originalLength = reader.u32(), let includedLength = reader.u32(),
                  let flags = reader.u32(), let drops = reader.u32(), let timestamp = reader.u64(),
                  let data = reader.bytes(Int(includedLength))
            else {
                truncatedTailLength = bytes.count - recordStart
                return
            }
            records.append(BtsnoopRecord(
                originalLength: originalLength, flags: flags, cumulativeDrops: drops,
                timestamp: timestamp, data: data))
        }
        truncatedTailLength = 0
    }

    /// Big-endian reads that return nil past the end.
    private struct BigEndianReader {
        let bytes: [UInt8]
        var offset = 0
        var remaining: Int { bytes.count - offset }

        mutating func bytes(_ count: Int) -> [UInt8]? {
            guard count >= 0, remaining >= count else { return nil }
            defer { offset += count }
            return Array(bytes[offset..<offset + count])
        }

        mutating func u32() -> UInt32? {
            bytes(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } }
        }

        mutating func u64() -> UInt64? {
            bytes(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } }
        }
    }
}

/// Records everything that crosses a transport into a btsnoop file: packets the host sends as
/// they are sent, packets from the controller as they are received.
public final class SnoopingTransport: HCITransport {
    public let wrapped: HCITransport
    public let writer: BtsnoopWriter

    public init(wrapping transport: HCITransport, writer: BtsnoopWriter) {
        wrapped = transport
        self.writer = writer
    }

    private final class RecordingSink: HCIPacketSink {
        let sink: HCIPacketSink
        let writer: BtsnoopWriter
        init(sink: HCIPacketSink, writer: BtsnoopWriter) {
            self.sink = sink
            self.writer = writer
        }
        func receive(_ packet: HCIPacket) {
            writer.write(packet, direction: .received)
            sink.receive(packet)
        }
        func transportClosed(_ error: HCITransportError?) { sink.transportClosed(error) }
    }

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        try wrapped.open(on: loop, sink: RecordingSink(sink: sink, writer: writer))
    }

    public func send(_ packet: HCIPacket) {
        writer.write(packet, direction: .sent)
        wrapped.send(packet)
    }

    public func close() { wrapped.close() }
}

/// Capturing selected by the environment.
public enum Snoop {
    /// The environment variable naming the btsnoop file to write.
    public static let environmentVariable = "CB_SNOOP"

    /// A writer for the file named by `CB_SNOOP`, or nil when it is unset or empty.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> BtsnoopWriter? {
        guard let path = environment[environmentVariable], !path.isEmpty else { return nil }
        return try BtsnoopWriter(path: path)
    }

    /// Wraps `transport` in a `SnoopingTransport` when `CB_SNOOP` is set.
    public static func wrapFromEnvironment(
        _ transport: HCITransport,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> HCITransport {
        guard let writer = try fromEnvironment(environment) else { return transport }
        return SnoopingTransport(wrapping: transport, writer: writer)
    }
}
