import ByteCoding
import HCI
import L2CAP

/// A double of the layer under L2CAP (`L2CAPLowerLayer`, the HCI driver in the stack): records
/// the whole PDUs L2CAP sends down, and refuses them when the test says so.
public final class FakeLowerLayer: L2CAPLowerLayer, @unchecked Sendable {
    /// Every PDU accepted, in order.
    public var sent: [[UInt8]] = []
    /// False makes `sendACL` refuse, as a full controller queue does.
    public var accepting = true

    public init() {}

    public func sendACL(handle: ConnectionHandle, pdu: [UInt8]) -> Bool {
        guard accepting else { return false }
        sent.append(pdu)
        return true
    }
    public func queuedPDUs(handle: ConnectionHandle) -> Int { 0 }
    /// The PDUs sent, in hex.
    public var sentHex: [String] { sent.map(\.hexString) }
}
