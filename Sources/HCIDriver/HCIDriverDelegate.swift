import HCI
import HCITransport

/// What the layer above the driver hears. Called on the driver's loop.
///
/// The driver consumes Command Complete, Command Status and Number Of Completed Packets; every
/// other event is passed up, after the driver has updated its own state from it (connections
/// registered by LE Connection Complete, credits returned by Disconnection Complete).
public protocol HCIDriverDelegate: AnyObject {
    /// An event from the controller.
    func didReceiveEvent(_ event: HCIEvent)
    /// A whole L2CAP PDU (basic header included) reassembled from ACL fragments.
    func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8])
    /// The connection's outbound queue drained after having had to wait for controller buffers:
    /// the layer above may send again (CoreBluetooth's "ready to send write without response").
    func driverCanSendMore(handle: ConnectionHandle)
    /// The transport closed: `nil` when closed locally. Pending commands have failed by now.
    func driverDidClose(error: HCITransportError?)
}

extension HCIDriverDelegate {
    public func driverCanSendMore(handle: ConnectionHandle) {}
    public func driverDidClose(error: HCITransportError?) {}
}
