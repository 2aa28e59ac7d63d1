import ATT
import GATT
import HCI
import HCIDriver
import HCITransport
import HostStack
import L2CAP
import SMP

/// A user of a host device: a central or peripheral role service (one per Core Bluetooth
/// manager), later a daemon's client. The device calls it on its loop, with only what concerns
/// it: discoveries while it scans, the connections it owns, requests for its own services.
/// Every method has an empty default.
public protocol HostDeviceClient: AnyObject {
    /// A report, while this client scans (every report: filtering and coalescing are the
    /// client's).
    func device(_ device: HostDevice, didDiscover report: AdvertisingReport)
    /// The controller refused to scan; this client's scan is off.
    func device(_ device: HostDevice, scanFailed error: HCIError)

    /// A connection this client owns is ready: one it asked for (as central, after the ATT
    /// MTU exchange), or, for a client that accepts incoming connections, one a peer made.
    func device(_ device: HostDevice, didConnect connection: DeviceConnection)
    /// A connection this client asked for could not be made.
    func device(_ device: HostDevice, didFailToConnectTo peer: LEAddress, error: DeviceConnectError)
    /// A connection this client owned or used is gone for it: the link went down (`reason`),
    /// or the client gave it up while others keep it (`.connectionTerminatedByLocalHost`).
    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus)

    /// This client's advertising stopped by itself (a central connected to legacy advertising,
    /// or directed advertising timed out).
    func deviceDidStopAdvertising(_ device: HostDevice)

    /// A read of a dynamic value of one of this client's services.
    func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void)
    /// Writes of dynamic values of this client's services (one, or an Execute Write's batch).
    func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                respond: @escaping (ATTErrorCode?) -> Void)
    /// A peer changed its subscription to one of this client's characteristics (also to `[]`
    /// when it disconnects).
    func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration,
                from old: GATTClientConfiguration, forCharacteristic valueHandle: ATTHandle, on connection: DeviceConnection)
    /// This many of this client's updates that had to wait (`GATTServer.updateValue` with its
    /// `updateOwner`) were handed over to every connection they waited for, or dropped.
    func device(_ device: HostDevice, updatesHandedOver count: Int)

    /// A peer opened a credit-based channel to a PSM this client published
    /// (``HostDevice/publishChannel(for:psm:requiresEncryption:)``). The client takes it over
    /// (its handlers) or closes it.
    func device(_ device: HostDevice, didOpen channel: L2CAPCreditChannel, on connection: DeviceConnection, psm: UInt16)

    /// The controller is gone (transport closed, powered off): every connection, scan and
    /// advertisement of the device ended with it.
    func device(_ device: HostDevice, didClose error: HCITransportError?)
    /// The controller reset itself: the client's connections were reported gone (each with
    /// `didDisconnect`, Hardware Failure) just before; its scan, pending connections,
    /// advertising, services and published channels are gone too. Nothing may be asked of the
    /// device until `deviceDidReset`.
    func deviceWillReset(_ device: HostDevice)
    /// The controller is back after `deviceWillReset`: the client may scan, connect, add
    /// services and advertise again.
    func deviceDidReset(_ device: HostDevice)

    /// Answers pairing prompts on the connections this client owns (the first owner's agent
    /// answers); nil leaves them to the device's agent.
    var pairingAgent: (any PairingAgent)? { get }
}

extension HostDeviceClient {
    public func device(_ device: HostDevice, didDiscover report: AdvertisingReport) {}
    public func device(_ device: HostDevice, scanFailed error: HCIError) {}
    public func device(_ device: HostDevice, didConnect connection: DeviceConnection) {}
    public func device(_ device: HostDevice, didFailToConnectTo peer: LEAddress, error: DeviceConnectError) {}
    public func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {}
    public func deviceDidStopAdvertising(_ device: HostDevice) {}
    public func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                       respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) { respond(.failure(.unlikelyError)) }
    public func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                       respond: @escaping (ATTErrorCode?) -> Void) { respond(.unlikelyError) }
    public func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration,
                       from old: GATTClientConfiguration, forCharacteristic valueHandle: ATTHandle,
                       on connection: DeviceConnection) {}
    public func device(_ device: HostDevice, updatesHandedOver count: Int) {}
    public func device(_ device: HostDevice, didOpen channel: L2CAPCreditChannel, on connection: DeviceConnection,
                       psm: UInt16) { channel.close() }
    public func device(_ device: HostDevice, didClose error: HCITransportError?) {}
    public func deviceWillReset(_ device: HostDevice) {}
    public func deviceDidReset(_ device: HostDevice) {}
    public var pairingAgent: (any PairingAgent)? { nil }
}

/// Why a connection attempt failed.
public enum DeviceConnectError: Error, Sendable, CustomStringConvertible {
    /// The controller refused to start connecting.
    case refused(HCIError)
    /// The controller's attempt ended without a connection.
    case failed(HCIStatus)
    /// The link went down before it was ready (during the ATT MTU exchange).
    case droppedBeforeReady(HCIStatus)

    public var description: String {
        switch self {
        case .refused(let error): "the controller refused to connect: \(error)"
        case .failed(let status): "the connection failed (\(status))"
        case .droppedBeforeReady(let status): "the connection failed (\(status))"
        }
    }
}

/// What a client is to its device.
public struct HostDeviceRoles: OptionSet, Sendable, Hashable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// Scans and makes connections.
    public static let central = HostDeviceRoles(rawValue: 1 << 0)
    /// Advertises, publishes services and is told of connections peers make.
    public static let peripheral = HostDeviceRoles(rawValue: 1 << 1)
}
