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

    /// What `queuedPDUs` answers: PDUs the test pretends wait for controller buffers (0, as
    /// a controller with room forever, unless a test scripts it).
    public var queued = 0
    /// True makes each accepted PDU count in `queued` until the test calls `drain`.
    public var holdsSentPDUs = false

    public init() {}

    public func sendACL(handle: ConnectionHandle, pdu: [UInt8]) -> Bool {
        guard accepting else { return false }
        sent.append(pdu)
        if holdsSentPDUs { queued += 1 }
        return true
    }
    public func queuedPDUs(handle: ConnectionHandle) -> Int { queued }
    /// The controller took every waiting PDU: `queued` is 0 again, and `link` is told as the
    /// HCI driver tells it.
    public func drain(_ link: L2CAPLink) {
        queued = 0
        link.lowerLayerCanSendMore()
    }
    /// The PDUs sent, in hex.
    public var sentHex: [String] { sent.map(\.hexString) }
}
