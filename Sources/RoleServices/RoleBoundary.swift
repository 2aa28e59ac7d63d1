import ATT
import AssignedNumbers
import GATT
import HCI
import HCIDriver
import HostDevice
import SMP

// The role-service boundary: what the API side (CoreBluetooth's managers and peripherals) asks
// of a role and hears from it, in values only (addresses, UUIDs, handles, bytes, errors). The
// role services of this module implement it in the process; a daemon's client implements it
// with messages (docs/daemon.md). Every call and event is on the role's loop, except where a
// requirement says otherwise.

/// The central role of one API client: a scan, connections, and a link per connected peer.
public protocol CentralRole: AnyObject, Sendable {
    /// Who hears the role's events (held weakly).
    var events: CentralServiceEvents? { get set }
    /// Answers pairing prompts on the role's links (any thread); nil leaves them to the
    /// device's agent.
    var pairingAgent: (any PairingAgent)? { get set }
    /// Whether the role's device is on.
    var isOn: Bool { get }

    /// Starts (or replaces) the scan: `didDiscover` for what matches it.
    func startScan(_ request: ScanRequest)
    func stopScan()
    /// Connects to `peer` (never timing out): `didConnect` or `didFailToConnect` follows.
    /// With `autoReconnect`, a link that drops is made again until `cancel`.
    func connect(_ peer: LEAddress, autoReconnect: Bool)
    /// Ends the connection to `peer` or stops connecting to it; `notify`: whether the API
    /// side wants `didDisconnect` for it.
    func cancel(_ peer: LEAddress, notify: Bool)
    /// The link to `peer`, while it is connected.
    func link(for peer: LEAddress) -> (any CentralRoleLink)?

    /// Reads the RSSI (dBm) of the link to `peer`.
    func readRSSI(of peer: LEAddress, completion: @escaping (Result<Int8, HCIError>) -> Void)
    /// Opens a credit-based channel to `psm` on the link to `peer`.
    func openChannel(to peer: LEAddress, psm: UInt16, completion: @escaping (Result<RoleChannel, ChannelOpenError>) -> Void)
    /// Asks for `phy` both ways on the link to `peer` (fire and forget).
    func setPHY(of peer: LEAddress, _ phy: LEPHY)
    /// Asks for new connection parameters on the link to `peer` (fire and forget).
    func updateParameters(of peer: LEAddress, _ parameters: ConnectionParameters)
}

/// One connection of a central role: the GATT client procedures on the peer's database, in
/// values. Each completion is called once, on the role's loop.
public protocol CentralRoleLink: AnyObject, Sendable {
    var peer: LEAddress { get }
    /// Who hears of the link (held weakly); nil until the API side takes the link.
    var events: CentralLinkEvents? { get set }
    /// Whether the link is gone (nothing more is sent or delivered).
    var isClosed: Bool { get }
    /// ATT_MTU now (`linkMTUChanged` tells of changes).
    var mtu: Int { get }

    /// Primary services: all when `uuid` is nil, else those of that type.
    func discoverPrimaryServices(uuid: BluetoothUUID?,
                                 completion: @escaping (Result<[DiscoveredService], GATTClientError>) -> Void)
    func discoverIncludedServices(of service: DiscoveredService,
                                  completion: @escaping (Result<[DiscoveredIncludedService], GATTClientError>) -> Void)
    func discoverCharacteristics(of service: DiscoveredService,
                                 completion: @escaping (Result<[DiscoveredCharacteristic], GATTClientError>) -> Void)
    func discoverDescriptors(of characteristic: DiscoveredCharacteristic,
                             completion: @escaping (Result<[DiscoveredDescriptor], GATTClientError>) -> Void)
    /// Reads a value (a long one entirely).
    func readValue(of handle: ATTHandle, completion: @escaping (Result<[UInt8], GATTClientError>) -> Void)
    /// Writes a value with response (a long write when it does not fit one request).
    func writeValue(_ value: [UInt8], to handle: ATTHandle, completion: @escaping (Result<Void, GATTClientError>) -> Void)
    /// Queues a write without response; `linkReturnedWriteBudget` counts those sent.
    func enqueueWrite(_ value: [UInt8], to handle: ATTHandle)
    /// Subscribes (notifications, else indications): `onValue` gets each value from then on.
    /// `clientConfiguration`: the CCCD's handle when known.
    func subscribe(to characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                   onValue: @escaping ([UInt8]) -> Void, completion: @escaping (Result<Void, GATTClientError>) -> Void)
    func unsubscribe(from characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                     completion: @escaping (Result<Void, GATTClientError>) -> Void)
}

/// The peripheral role of one API client: its services in the device's database, its
/// advertising, answers to requests and updates to subscribers.
public protocol PeripheralRole: AnyObject, Sendable {
    /// Who hears the role's events (held weakly).
    var events: PeripheralServiceEvents? { get set }
    /// Answers pairing prompts on the role's links (any thread); nil leaves them to the
    /// device's agent.
    var pairingAgent: (any PairingAgent)? { get set }
    /// Whether the role's device is on.
    var isOn: Bool { get }

    /// Publishes `definition` under `key` (its included services named by `includedKeys`):
    /// `didPublish` follows.
    func publish(_ definition: GATTService, key: Int, includedKeys: [Int])
    /// `didUnpublish` follows.
    func unpublish(_ key: Int)
    /// `didUnpublish` for each published service.
    func unpublishAll()
    /// `didStartAdvertising` follows. `raw`: advertisement and scan response bytes advertised
    /// as they are.
    func startAdvertising(name: String?, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt8]?,
                          raw: (advertisement: [UInt8], scanResponse: [UInt8])?)
    func stopAdvertising()
    func setDesiredConnectionLatency(_ latency: PeripheralConnectionLatency, for central: Int)
    /// Answers request `id`: `error` nil for success, with `value` for a read.
    func answer(_ id: Int, error: ATTErrorCode?, value: [UInt8]?)
    /// Any thread: takes a slot of the update budget for `update` (see
    /// ``PeripheralService/acceptUpdate(_:)``); `needsDrain`: run `drainInbox()` on the loop.
    func acceptUpdate(_ update: consuming PeripheralUpdate) -> (accepted: Bool, needsDrain: Bool)
    func drainInbox()
    /// Publishes a channel server on `psm` (a dynamic one when nil): the PSM, or why not.
    func publishChannel(psm: UInt16?, requiresEncryption: Bool, completion: @escaping (Result<UInt16, ChannelPublishError>) -> Void)
    /// Stops accepting channels to `psm`: false when this role did not publish it.
    func unpublishChannel(_ psm: UInt16, completion: @escaping (Bool) -> Void)
}
