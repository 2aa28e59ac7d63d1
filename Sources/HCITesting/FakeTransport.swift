import ByteCoding
import HCI
import HCITransport
import Scheduling

/// A transport double: records what the driver sends and lets a test (or a scripted
/// controller) inject packets. Everything happens on the test's manually paced loop.
public final class FakeTransport: HCITransport, @unchecked Sendable {
    public private(set) var sink: HCIPacketSink?
    public private(set) var loop: EventLoop?
    public private(set) var isOpen = false
    public var openError: HCITransportError?
    /// Every packet the driver sent, in order.
    public private(set) var sent: [HCIPacket] = []
    /// Called for each packet the driver sends (after it is recorded).
    public var onSend: ((HCIPacket) -> Void)?

    public init() {}

    public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
        if let openError { throw openError }
        self.loop = loop
        self.sink = sink
        isOpen = true
    }

    public func send(_ packet: HCIPacket) {
        guard isOpen else { return }
        sent.append(packet)
        onSend?(packet)
    }

    public func close() {
        guard isOpen else { return }
        isOpen = false
        sink?.transportClosed(nil)
    }

    /// The transport broke.
    public func fail(_ error: HCITransportError) {
        guard isOpen else { return }
        isOpen = false
        sink?.transportClosed(error)
    }

    /// Delivers a packet to the driver now.
    public func inject(_ packet: HCIPacket) { sink?.receive(packet) }

    /// Delivers an H4 frame (indicator byte first) given in hex.
    public func inject(h4 hex: String) {
        inject(try! HCIPacket(h4: [UInt8](hex: hex)!))
    }

    public var sentCommands: [HCICommandPacket] {
        sent.compactMap { if case .command(let c) = $0 { c } else { nil } }
    }

    public var sentACL: [ACLDataPacket] {
        sent.compactMap { if case .acl(let a) = $0 { a } else { nil } }
    }

    /// The H4 frames sent, in hex.
    public var sentHex: [String] { sent.map(\.h4Bytes.hexString) }

    public func clearSent() { sent.removeAll() }
}

/// A sink that keeps what it is given, readable from any thread.
public final class RecordingSink: HCIPacketSink {
    private struct Record {
        var packets: [HCIPacket] = []
        var closes: [HCITransportError?] = []
    }
    private let record = Locked(Record())

    public init() {}

    public func receive(_ packet: HCIPacket) { record.withLock { $0.packets.append(packet) } }
    public func transportClosed(_ error: HCITransportError?) { record.withLock { $0.closes.append(error) } }

    /// Packets received so far.
    public var packets: [HCIPacket] { record.withLock { $0.packets } }
    /// One entry per `transportClosed` call (there should never be more than one).
    public var closes: [HCITransportError?] { record.withLock { $0.closes } }
    public var isClosed: Bool { !closes.isEmpty }
}
