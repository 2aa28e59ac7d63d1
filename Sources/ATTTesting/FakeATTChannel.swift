import ATT
import ByteCoding
import HCI

/// An ATT channel double: records what the bearer sends, delivers what the test says the peer
/// sent, and has a queue depth the test sets.
public final class FakeATTChannel: ATTChannel, @unchecked Sendable {
    public var sent: [[UInt8]] = []
    public var onReceive: ((consuming [UInt8]) -> Void)?
    public var onClose: (() -> Void)?
    public var onCanSendMore: (() -> Void)?
    public var queuedPDUs = 0
    public var securityLevel = LESecurityLevel.noSecurity

    public init() {}

    public func send(_ sdu: [UInt8]) -> Bool {
        sent.append(sdu)
        return true
    }

    /// The peer sent these bytes.
    public func deliver(_ hex: String) { onReceive?([UInt8](hex: hex)!) }

    /// What the bearer sent since the last call, as hex strings.
    public func takeSent() -> [String] {
        defer { sent = [] }
        return sent.map(\.hexString)
    }
}
