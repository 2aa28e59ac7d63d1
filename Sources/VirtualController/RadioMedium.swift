import HCI
import Scheduling

/// What a `VirtualController` needs of the air it transmits on: the in-process `VirtualRadio`,
/// or a `RadioProxy` standing in for a radio another process hosts (`RadioServer`). Every
/// method is called on `loop`.
public protocol RadioMedium: AnyObject, Sendable {
    /// The loop the controllers on this medium run on.
    var loop: EventLoop { get }
    /// Whether packets take air time (and connections run in connection events).
    var airTime: AirTimeMode { get }

    /// Attaches a device at a position; returns its identifier on the medium.
    func attach(_ device: RadioDevice, at position: RadioPosition) -> RadioDeviceID
    func detach(_ id: RadioDeviceID)
    func position(of id: RadioDeviceID) -> RadioPosition?
    func move(_ id: RadioDeviceID, to position: RadioPosition)
    func setTxPowerOffset(_ id: RadioDeviceID, _ offset: Double)
    func setPowered(_ id: RadioDeviceID, _ on: Bool)
    /// The device's `listensForAdvertising` may have changed (it started or stopped scanning or
    /// initiating): a medium that delivers broadcasts to listeners only asks it again.
    func listeningChanged(_ id: RadioDeviceID)
    /// The RSSI `receiver` would measure for `sender` now, if the medium can tell.
    func rssi(from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int8?

    /// Broadcasts a legacy advertising PDU; returns its air time (ns).
    @discardableResult
    func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID) -> Int64
    /// Sends a legacy advertising PDU to one device; returns its air time (ns).
    @discardableResult
    func transmit(_ pdu: AdvertisingPDU, from sender: RadioDeviceID, to receiver: RadioDeviceID) -> Int64
    /// Sends an extended advertising PDU on `phy`, to one device or (receiver nil) to all.
    @discardableResult
    func transmit(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, from sender: RadioDeviceID,
                  to receiver: RadioDeviceID?) -> Int64
    /// Sends a data PDU to the other end of a connection; nil if nobody could hear it.
    @discardableResult
    func transmit(_ pdu: consuming DataPDU, accessAddress: UInt32, from sender: RadioDeviceID, phy: LEPHY) -> Int64?

    func openLink(_ accessAddress: UInt32, between a: RadioDeviceID, and b: RadioDeviceID)
    func closeLink(_ accessAddress: UInt32)
    func abandonLink(_ accessAddress: UInt32, by gone: RadioDeviceID)
    func isLinkReachable(_ accessAddress: UInt32) -> Bool

    /// A fresh access address for a new connection.
    func newAccessAddress() -> UInt32
    func randomUInt64() -> UInt64
    func randomInt(in range: ClosedRange<Int>) -> Int
}

extension RadioMedium {
    public func attach(_ device: RadioDevice) -> RadioDeviceID { attach(device, at: RadioPosition()) }

    /// A medium that hands every broadcast to every device (a proxy: the radio it stands for
    /// hears everything its devices might) needs no word of it.
    public func listeningChanged(_ id: RadioDeviceID) {}

    @discardableResult
    public func transmit(_ pdu: ExtendedAdvertisingPDU, phy: LEPHY, from sender: RadioDeviceID) -> Int64 {
        transmit(pdu, phy: phy, from: sender, to: nil)
    }
}
