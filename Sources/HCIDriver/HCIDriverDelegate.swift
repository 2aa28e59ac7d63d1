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
    /// `pdu` is handed over (consumed), so that a layer above may take its header off in place.
    func didReceiveACL(handle: ConnectionHandle, pdu: consuming [UInt8])
    /// The connection's outbound queue drained after having had to wait for controller buffers:
    /// the layer above may send again (CoreBluetooth's "ready to send write without response").
    func driverCanSendMore(handle: ConnectionHandle)
    /// The transport closed: `nil` when closed locally. Pending commands have failed by now.
    func driverDidClose(error: HCITransportError?)
    /// The controller reset itself (a Hardware Error event, or a Command Complete for a Reset
    /// the host did not send): every pending command has failed with `error`, every
    /// connection's ACL state is gone, and the driver is initialising the controller again
    /// (commands other than its own fail until then). `driverDidReset` follows, or
    /// `driverDidClose` when the controller cannot be initialised or reset too often.
    func driverWillReset(_ error: HCIError)
    /// The controller is initialised again after `driverWillReset`: `controllerInfo` is new.
    func driverDidReset(_ info: ControllerInfo)
}

extension HCIDriverDelegate {
    public func driverCanSendMore(handle: ConnectionHandle) {}
    public func driverDidClose(error: HCITransportError?) {}
    public func driverWillReset(_ error: HCIError) {}
    public func driverDidReset(_ info: ControllerInfo) {}
}
