import ATT
import AssignedNumbers
import Foundation // for `Data` only: the app's update values, kept as given
import GAP
import GATT
import HCI
import HCIDriver
import HCITransport
import HostDevice
import HostStack
import L2CAP
import Logging
import SMP
import Scheduling
import StackLogging
import Synchronization

/// How short a connection interval the API side wants for a central.
public enum PeripheralConnectionLatency: Sendable, Hashable {
    case low, medium, high
}

/// Why a service could not be published.
public enum PeripheralPublishError: Error, Sendable, Hashable {
    /// The key names a service that is published already.
    case alreadyPublished
    /// An included service's key names no published service.
    case includedServiceNotPublished(key: Int)
    /// The device's GATT database refused it.
    case database(GATTDatabaseError)
}

/// Why a service could not be unpublished.
public enum PeripheralUnpublishError: Error, Sendable, Hashable {
    case notPublished
    /// The published service with this key includes it.
    case included(byKey: Int)
    case database(GATTDatabaseError)
}

/// Why advertising did not start.
public enum PeripheralAdvertisingError: Error, Sendable {
    case alreadyAdvertising
    /// The manufacturer data (this many bytes) does not fit in the advertisement.
    case manufacturerDataDoesNotFit(byteCount: Int)
    /// The device or controller refused.
    case refused(HCIError)
}

/// One write of a request (or of an Execute Write's batch) to one of the service's values.
public struct PeripheralWrite: Sendable, Hashable {
    public let central: Int
    public let handle: ATTHandle
    public let offset: Int
    public let value: [UInt8]

    public init(central: Int, handle: ATTHandle, offset: Int, value: [UInt8]) {
        self.central = central
        self.handle = handle
        self.offset = offset
        self.value = value
    }
}

/// A value the API side accepted for its subscribers, on its way to the loop: the
/// characteristic's value handle (0 when it was not published), the bytes as the app gave them,
/// and the central ids to send to (nil: every subscriber).
public struct PeripheralUpdate: Sendable {
    public let handle: ATTHandle
    public private(set) var value: Data
    public let centrals: [Int]?

    public init(handle: ATTHandle, value: Data, centrals: [Int]?) {
        self.handle = handle
        self.value = value
        self.centrals = centrals
    }

    /// The value, moved out of the update (an empty one left behind): reading the field, or
    /// returning it from a consuming method, copied it (a retain, and a release with the update).
    mutating func takeValue() -> Data {
        var taken = Data()
        swap(&taken, &value)
        return taken
    }

    /// What a drain leaves in a buffer's slot it moved an update out of (nothing to release).
    static let moved = PeripheralUpdate(handle: ATTHandle(0), value: Data(), centrals: nil)
}

/// What the peripheral role service tells the API side (a `CBPeripheralManager`, or a daemon's
/// client later): plain values — keys, handles, central ids, bytes, errors. Called on the
/// device's loop.
public protocol PeripheralServiceEvents: AnyObject {
    /// A central connected, or a connection the device made otherwise first used this
    /// client's services: `central` names it in every later event until `centralDisconnected`.
    func peripheral(_ service: any PeripheralRole, centralConnected central: Int, peer: LEAddress, mtu: Int)
    func peripheral(_ service: any PeripheralRole, central: Int, mtuChanged mtu: Int)
    /// The central is gone (or the device stopped); the requests it left unanswered are dropped.
    func peripheral(_ service: any PeripheralRole, centralDisconnected central: Int, abandonedRequests: [Int])
    /// A read of a dynamic value, to answer with `answer(_:error:value:)`.
    func peripheral(_ service: any PeripheralRole, readRequest id: Int, central: Int, handle: ATTHandle, offset: Int)
    /// Writes of dynamic values: `id` is -1 for a Write Command (already answered), else the
    /// request to answer once.
    func peripheral(_ service: any PeripheralRole, writeRequest id: Int, writes: [PeripheralWrite])
    func peripheral(_ service: any PeripheralRole, central: Int, subscribedTo handle: ATTHandle)
    func peripheral(_ service: any PeripheralRole, central: Int, unsubscribedFrom handle: ATTHandle)
    /// Half the update budget is free again after `acceptUpdate` refused one.
    func peripheralReadyToUpdateSubscribers(_ service: any PeripheralRole)
    /// The answer to `publish`.
    func peripheral(_ service: any PeripheralRole, didPublish key: Int, result: Result<GATTServiceHandles, PeripheralPublishError>)
    /// The answer to `unpublish` (and one per service for `unpublishAll`).
    func peripheral(_ service: any PeripheralRole, didUnpublish key: Int, error: PeripheralUnpublishError?)
    /// The answer to `startAdvertising`: `error` nil when it started; `isOn` false when it did
    /// not, or was stopped while starting.
    func peripheral(_ service: any PeripheralRole, didStartAdvertising error: PeripheralAdvertisingError?, isOn: Bool)
    /// Advertising is off: asked for, or it could not go on after a central connected.
    func peripheralAdvertisingStopped(_ service: any PeripheralRole)
    /// The controller is gone.
    func peripheral(_ service: any PeripheralRole, deviceDidClose error: HCITransportError?)
    /// A central opened a channel to a PSM this service published (`central` as in the other
    /// events; the channel's events go to whoever the API side sets).
    func peripheral(_ service: any PeripheralRole, central: Int, didOpen channel: RoleChannel)
    /// The controller reset itself: every central was reported gone just before, and the
    /// role's services and advertising are gone (the API side adds them again); off until
    /// `peripheralDeviceDidReset`.
    func peripheralDeviceWillReset(_ service: any PeripheralRole)
    /// The controller is back after its reset: the role is on again, with nothing published.
    func peripheralDeviceDidReset(_ service: any PeripheralRole)
}

extension PeripheralServiceEvents {
    public func peripheralDeviceWillReset(_ service: any PeripheralRole) {}
    public func peripheralDeviceDidReset(_ service: any PeripheralRole) {}
}

/// The peripheral role of one API client, a client of the host device, on the device's loop:
/// its services in the device's one GATT database (requests for them come here; the server
/// sends the updates and keeps who subscribed), its advertising set, one link per central that
/// connected or used its services, and pending requests. It exchanges only values with the API
/// side (``PeripheralServiceEvents``), the boundary a daemon carries between processes.
///
/// Loop-confined once the device started, except `acceptUpdate` (the inbox behind its lock),
/// which the app's threads call without waiting for the loop.
public final class PeripheralService: HostDeviceClient, PeripheralRole, @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        device?.loop.assertConfined("PeripheralService", file: file, line: line)
    }

    @exclusivity(unchecked) private var eventsHeld = WeakHeldExistential<any PeripheralServiceEvents>(wrappedValue: nil)  // exclusivity checks: 0.3 % of notify
    public var events: (any PeripheralServiceEvents)? {
        get { eventsHeld.wrappedValue }
        set { eventsHeld.wrappedValue = newValue }
    }
    /// `corebluetooth.api`: what the service drops or refuses.
    public var logger = StackLogging.standard.logger(.api)
    /// Hears how many accepted updates left the loop (sent or dropped) each time slots come
    /// back: a daemon relays the count to its client, whose own inbox keeps the budget.
    /// (Unchecked exclusivity: set and read on the loop; its check, each time slots came back,
    /// was ~2 % of `fleet_timed_speedup`.)
    @exclusivity(unchecked) public var updatesReleased: ((Int) -> Void)?
    /// Answers pairing prompts on this client's connections; nil leaves them to the device's
    /// agent. Settable from any thread (the API sets it; the device reads it on its loop).
    public var pairingAgent: (any PairingAgent)? {
        get { pairingAgentStorage.withLock { $0 } }
        set { pairingAgentStorage.withLock { $0 = newValue } }
    }
    private let pairingAgentStorage = Locked<(any PairingAgent)?>(nil)

    // MARK: Shared with the app's threads

    /// Values the API side accepted, waiting for the loop.
    private let inbox = Locked(UpdateInbox())
    /// Central ids, unique in the process (so a central of another service never matches).
    private static let centralIDs = Atomic<Int>(0)

    // MARK: Loop-confined

    public private(set) var device: HostDevice?
    @exclusivity(unchecked) private var gatt: GATTServer?  // exclusivity checks: 0.05 % of pair
    /// Whose count the device's GATT server reports this client's handed-over updates under.
    private var updateOwner = 0
    /// By the connection's GATT server connection (what requests carry).
    @exclusivity(unchecked) private var links = IntegerKeyMap<ObjectIdentifier, Link>()  // exclusivity checks: 0.06 % of pair
    private var linksByCentral = IntegerKeyMap<Int, Link>()

    private var published: [Int: PublishedService] = [:]
    /// The value handles of the published characteristics.
    @exclusivity(unchecked) private var valueHandles: Set<ATTHandle> = []  // exclusivity checks: 0.07 % of pair

    private var nextTransaction = 0
    private var pendingAnswers: [Int: PendingAnswer] = [:]

    private var advertising = AdvertisingState.off
    private var advertisingParameters: AdvertisingParameters?

    @exclusivity(unchecked) private var drained: [PeripheralUpdate] = []  // exclusivity checks: 0.05 % of pair

    final class Link: ATTBearerListener {
        let connection: DeviceConnection
        let bearer: ATTBearer
        let gattConnection: GATTBearerConnection
        let central: Int
        @WeakHeld var service: PeripheralService?
        var isOpen = true

        init(connection: DeviceConnection, bearer: ATTBearer, gattConnection: GATTBearerConnection, central: Int) {
            self.connection = connection
            self.bearer = bearer
            self.gattConnection = gattConnection
            self.central = central
        }

        func attBearerMTUDidChange(to mtu: Int) {
            guard let service else { return }
            service.events?.peripheral(service, central: central, mtuChanged: mtu)
        }
    }

    struct PublishedService {
        let id: GATTServiceID
        let included: [Int]
        let valueHandles: [ATTHandle]
    }

    enum PendingAnswer {
        case read(central: Int, respond: (Result<[UInt8], ATTErrorCode>) -> Void)
        case write(central: Int, respond: (ATTErrorCode?) -> Void)

        var central: Int {
            switch self {
            case .read(let central, _), .write(let central, _): central
            }
        }
    }

    enum AdvertisingState { case off, starting, on }

    public init() {}

    // MARK: - Power

    /// Whether the device is on (the service is its client).
    public var isOn: Bool { device != nil }

    public func deviceDidStart(_ device: HostDevice) {
        assertOnLoop()
        self.device = device
        device.addClient(self, roles: .peripheral)
        gatt = device.gattServer
        updateOwner = device.updateOwner(of: self) ?? 0
    }

    /// The controller went away: connections end (each with `centralDisconnected`), advertising
    /// stops, and the services are gone (the API side forgets them itself), as Core Bluetooth
    /// does below poweredOff.
    public func deviceDidStop() {
        assertOnLoop()
        for link in Array(links.values) { closeLink(link) }
        device = nil
        gatt = nil
        advertising = .off
        advertisingParameters = nil
        published = [:]
        valueHandles = []
        inbox.withLock { $0.reset() }
    }

    // MARK: - Services

    /// Publishes `definition` (its included services named by `includedKeys`, resolved here)
    /// under `key`: `didPublish` follows before this returns.
    public func publish(_ definition: GATTService, key: Int, includedKeys: [Int]) {
        assertOnLoop()
        guard let device else { return }
        guard published[key] == nil else {
            events?.peripheral(self, didPublish: key, result: .failure(.alreadyPublished))
            return
        }
        var includedIDs: [GATTServiceID] = []
        for included in includedKeys {
            guard let record = published[included] else {
                events?.peripheral(self, didPublish: key, result: .failure(.includedServiceNotPublished(key: included)))
                return
            }
            includedIDs.append(record.id)
        }
        var definition = definition
        definition.includedServices = includedIDs
        let handles: GATTServiceHandles
        do throws(GATTDatabaseError) {
            handles = try device.addService(definition, for: self)
        } catch {
            events?.peripheral(self, didPublish: key, result: .failure(.database(error)))
            return
        }
        let values = handles.characteristics.map(\.value)
        valueHandles.formUnion(values)
        published[key] = PublishedService(id: handles.id, included: includedKeys, valueHandles: values)
        events?.peripheral(self, didPublish: key, result: .success(handles))
    }

    /// Removes the service published under `key` (not one another published service includes):
    /// `didUnpublish` follows before this returns.
    public func unpublish(_ key: Int) {
        assertOnLoop()
        guard let device else { return }
        guard let record = published[key] else {
            events?.peripheral(self, didUnpublish: key, error: .notPublished)
            return
        }
        if let includer = published.first(where: { $0.value.included.contains(key) }) {
            events?.peripheral(self, didUnpublish: key, error: .included(byKey: includer.key))
            return
        }
        do throws(GATTDatabaseError) {
            try device.removeService(record.id, for: self)
        } catch {
            events?.peripheral(self, didUnpublish: key, error: .database(error))
            return
        }
        drop(key, record)
    }

    /// Removes every published service (`didUnpublish` for each).
    public func unpublishAll() {
        assertOnLoop()
        guard let device else { return }
        device.removeAllServices(for: self)
        for (key, record) in published { drop(key, record) }
    }

    /// Forgets a removed service's handles (the server dropped the updates still queued for it).
    private func drop(_ key: Int, _ record: PublishedService) {
        published[key] = nil
        valueHandles.subtract(record.valueHandles)
        events?.peripheral(self, didUnpublish: key, error: nil)
    }

    // MARK: - Advertising

    /// `manufacturerData` (company identifier little-endian, then data) alone makes a beacon:
    /// non-connectable, non-scannable, all in the advertisement. `raw` (at most 31 octets each)
    /// is advertised as it is, connectable and scannable, instead of what the packer makes; the
    /// name still becomes the Device Name. `didStartAdvertising` follows.
    public func startAdvertising(name: String?, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt8]? = nil,
                                 raw: (advertisement: [UInt8], scanResponse: [UInt8])? = nil) {
        assertOnLoop()
        guard let device, let gatt else { return }
        guard advertising == .off else {
            events?.peripheral(self, didStartAdvertising: .alreadyAdvertising, isOn: false)
            return
        }
        let manufacturer = manufacturerData.flatMap { ManufacturerData(bytes: $0) }
        let beacon = manufacturer != nil && name == nil && serviceUUIDs.isEmpty
        // Core Bluetooth keeps the scan response for the local name: UUIDs that do not fit
        // the advertising data go to the overflow area.
        let packer = AdvertisingPacker(scanResponseLimit: beacon ? 0 : AdvertisingData.legacyMaximumLength,
                                       serviceUUIDsMayUseScanResponse: false)
        let packed = packer.pack(AdvertisingContent(flags: .leGeneralDiscoverableLEOnly, localName: name,
                                                    serviceUUIDs: serviceUUIDs, manufacturerData: manufacturer.map { [$0] } ?? []))
        if !packed.unplaced.isEmpty {
            events?.peripheral(self, didStartAdvertising: .manufacturerDataDoesNotFit(byteCount: manufacturerData?.count ?? 0),
                               isOn: false)
            return
        }
        if !packed.overflowServiceUUIDs.isEmpty {
            logger.notice("advertising: service UUIDs \(packed.overflowServiceUUIDs) do not fit and are not advertised (overflow area)")
        }
        // From the device's static random address (set when it starts), as phones advertise.
        let parameters = AdvertisingParameters(connectable: raw != nil || !beacon, scannable: raw != nil || !beacon,
                                               intervalMin: 0x00A0, intervalMax: 0x00A0,
                                               data: raw?.advertisement ?? packed.advertisingData.encoded,
                                               scanResponse: raw?.scanResponse ?? packed.scanResponse.encoded,
                                               ownRandomAddress: device.host.randomAddress != nil)
        if let name, !name.isEmpty { gatt.deviceName = String(name.prefix(248)) }
        advertising = .starting
        advertisingParameters = parameters
        device.startAdvertising(parameters, for: self) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self else { return }
            switch result {
            case .success:
                let isOn = self.advertising == .starting
                if isOn {
                    self.advertising = .on
                } else {
                    // Stopped while starting: make sure the controller is quiet.
                    self.device?.stopAdvertising(for: self)
                }
                self.events?.peripheral(self, didStartAdvertising: nil, isOn: isOn)
            case .failure(let failure):
                if self.advertising == .starting { self.advertising = .off }
                self.logger.warning("advertising could not start: \(failure)")
                self.events?.peripheral(self, didStartAdvertising: .refused(failure), isOn: false)
            }
        }
    }

    public func stopAdvertising() {
        assertOnLoop()
        events?.peripheralAdvertisingStopped(self)
        guard advertising != .off else { return }
        advertising = .off
        advertisingParameters = nil
        device?.stopAdvertising(for: self) { [logger] result in
            if case .failure(let error) = result { logger.warning("stopping advertising failed: \(error)") }
        }
    }

    /// Legacy connectable advertising stopped because a central connected: Core Bluetooth keeps
    /// advertising while connected, so it starts again unless the API side stopped it.
    public func deviceDidStopAdvertising(_ device: HostDevice) {
        assertOnLoop()
        guard advertising == .on, let parameters = advertisingParameters else { return }
        device.startAdvertising(parameters, for: self) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, case .failure(let error) = result, self.advertising == .on else { return }
            self.logger.warning("advertising could not resume while connected: \(error)")
            self.advertising = .off
            self.advertisingParameters = nil
            self.events?.peripheralAdvertisingStopped(self)
            self.device?.stopAdvertising(for: self)
        }
    }

    // MARK: - Connections

    /// A central connected to the device (every peripheral client of the device hears it).
    public func device(_ device: HostDevice, didConnect connection: DeviceConnection) {
        assertOnLoop()
        _ = link(for: connection)
    }

    /// The link for a connection: made when a central connects, or when a connection the
    /// device made otherwise (as central) first uses this client's services.
    private func link(for connection: DeviceConnection) -> Link? {
        if let link = links[ObjectIdentifier(connection.serverConnection)] { return link }
        guard connection.isOpen else { return nil }
        let bearer = connection.bearer
        let central = Self.centralIDs.add(1, ordering: .relaxed).newValue
        let link = Link(connection: connection, bearer: bearer, gattConnection: connection.serverConnection, central: central)
        link.service = self
        links[ObjectIdentifier(connection.serverConnection)] = link
        linksByCentral[central] = link
        bearer.addListener(link)
        events?.peripheral(self, centralConnected: central, peer: connection.peer, mtu: bearer.mtu)
        return link
    }

    public func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        assertOnLoop()
        guard let link = links[ObjectIdentifier(connection.serverConnection)], link.connection === connection else { return }
        closeLink(link)
    }

    public func device(_ device: HostDevice, didClose error: HCITransportError?) {
        assertOnLoop()
        events?.peripheral(self, deviceDidClose: error)
    }

    /// The controller reset itself (the links were reported gone; the device removed the
    /// services): off until it is back.
    public func deviceWillReset(_ device: HostDevice) {
        assertOnLoop()
        deviceDidStop()
        events?.peripheralDeviceWillReset(self)
    }

    public func deviceDidReset(_ device: HostDevice) {
        assertOnLoop()
        deviceDidStart(device)
        events?.peripheralDeviceDidReset(self)
    }

    /// The link is gone: its subscriptions end (the server reports each), its unanswered
    /// requests are forgotten, and updates waiting for it no longer do (the server drops them).
    private func closeLink(_ link: Link) {
        guard link.isOpen else { return }
        link.isOpen = false
        link.bearer.removeListener(link)
        links[ObjectIdentifier(link.gattConnection)] = nil
        linksByCentral[link.central] = nil
        let abandoned = pendingAnswers.filter { $0.value.central == link.central }.map(\.key)
        for id in abandoned { pendingAnswers[id] = nil }
        events?.peripheral(self, centralDisconnected: link.central, abandonedRequests: abandoned)
    }

    /// Whether `central` is connected.
    public func isConnected(_ central: Int) -> Bool { linksByCentral[central] != nil }

    // MARK: - Channels

    /// Publishes a channel server on a dynamic PSM (or `psm`, an SPSM the program names).
    /// `completion` runs before this returns.
    public func publishChannel(psm: UInt16?, requiresEncryption: Bool,
                               completion: @escaping (Result<UInt16, ChannelPublishError>) -> Void) {
        assertOnLoop()
        guard let device else { return completion(.failure(.noFreePSM)) }
        completion(device.publishChannel(for: self, psm: psm, requiresEncryption: requiresEncryption))
    }

    /// Stops accepting channels to `psm` (open ones stay). False when this service did not
    /// publish it. `completion` runs before this returns.
    public func unpublishChannel(_ psm: UInt16, completion: @escaping (Bool) -> Void) {
        assertOnLoop()
        completion(device?.unpublishChannel(psm, for: self) ?? false)
    }

    public func device(_ device: HostDevice, didOpen channel: L2CAPCreditChannel, on connection: DeviceConnection, psm: UInt16) {
        assertOnLoop()
        guard let link = link(for: connection) else { return channel.close() }
        events?.peripheral(self, central: link.central, didOpen: RoleChannel(channel: channel, peer: connection.peer))
    }

    /// Asks a connected central for a connection interval matching `latency`.
    public func setDesiredConnectionLatency(_ latency: PeripheralConnectionLatency, for central: Int) {
        assertOnLoop()
        guard let device, let link = linksByCentral[central] else { return }
        // Intervals in 1.25 ms units, supervision timeout in 10 ms units. Ranges an iPhone or a
        // Mac accepts (Apple's accessory design guidelines: a minimum of at least 15 ms and a
        // multiple of 15 ms, a maximum at least 15 ms above it; iOS refuses 7.5 ms).
        let parameters: ConnectionParameters
        switch latency {
        case .low: parameters = ConnectionParameters(intervalMin: 0x000C, intervalMax: 0x0018, latency: 0, timeout: 0x01F4)
        case .medium: parameters = ConnectionParameters(intervalMin: 0x0018, intervalMax: 0x0028, latency: 0, timeout: 0x01F4)
        case .high: parameters = ConnectionParameters(intervalMin: 0x0048, intervalMax: 0x0078, latency: 0, timeout: 0x0258)
        }
        device.updateParameters(link.connection, parameters) { [logger] result in
            if case .failure(let error) = result { logger.info("connection parameter update refused: \(error)") }
        }
    }

    // MARK: - Requests

    public func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                       respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) {
        assertOnLoop()
        guard let link = link(for: connection), valueHandles.contains(request.handle) else {
            return respond(.failure(.unlikelyError))
        }
        nextTransaction += 1
        let id = nextTransaction
        pendingAnswers[id] = .read(central: link.central, respond: respond)
        events?.peripheral(self, readRequest: id, central: link.central, handle: request.handle, offset: request.offset)
    }

    public func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                       respond: @escaping (ATTErrorCode?) -> Void) {
        assertOnLoop()
        guard let first = requests.first, let link = link(for: connection) else {
            return respond(.unlikelyError)
        }
        for request in requests where !valueHandles.contains(request.handle) { return respond(.unlikelyError) }
        let id: Int
        if first.isCommand {
            // Nobody waits for the answer to a Write Command: the API side's one is ignored.
            id = -1
            respond(nil)
        } else {
            nextTransaction += 1
            id = nextTransaction
            pendingAnswers[id] = .write(central: link.central, respond: respond)
        }
        let writes = requests.map { PeripheralWrite(central: link.central, handle: $0.handle, offset: $0.offset, value: $0.value) }
        events?.peripheral(self, writeRequest: id, writes: writes)
    }

    /// Answers request `id`: `error` nil for success, with `value` (a read's bytes from its
    /// offset on). Unknown or already answered ids are ignored.
    public func answer(_ id: Int, error: ATTErrorCode?, value: [UInt8]?) {
        assertOnLoop()
        guard let pending = pendingAnswers.removeValue(forKey: id) else { return }
        switch pending {
        case .read(_, let respond):
            if let error { respond(.failure(error)) } else { respond(.success(value ?? [])) }
        case .write(_, let respond):
            respond(error)
        }
    }

    /// Answers every request still waiting with `error`, oldest first: the API side that would
    /// have answered is gone (a daemon's client that left), and a central left without an answer
    /// would lose its link to the ATT timeout.
    public func answerPendingRequests(with error: ATTErrorCode) {
        assertOnLoop()
        let pending = pendingAnswers.sorted { $0.key < $1.key }
        pendingAnswers = [:]
        for (_, answer) in pending {
            switch answer {
            case .read(_, let respond): respond(.failure(error))
            case .write(_, let respond): respond(error)
            }
        }
    }

    // MARK: - Subscriptions

    public func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration,
                       from old: GATTClientConfiguration, forCharacteristic handle: ATTHandle, on connection: DeviceConnection) {
        assertOnLoop()
        let link = configuration.isEmpty ? links[ObjectIdentifier(connection.serverConnection)] : self.link(for: connection)
        guard let link, link.connection === connection, valueHandles.contains(handle) else { return }
        if old.isEmpty && !configuration.isEmpty {
            events?.peripheral(self, central: link.central, subscribedTo: handle)
        } else if !old.isEmpty && configuration.isEmpty {
            events?.peripheral(self, central: link.central, unsubscribedFrom: handle)
        }
    }

    // MARK: - Notifications and indications

    /// Any thread: takes a slot of the update budget for `update` (false when none is free:
    /// `peripheralReadyToUpdateSubscribers` follows once there is room). `needsDrain`: the
    /// caller must run `drainInbox()` on the loop.
    public func acceptUpdate(_ update: consuming PeripheralUpdate) -> (accepted: Bool, needsDrain: Bool) {
        inbox.accept(update)
    }

    /// Hands what `acceptUpdate` took to the GATT server, which sends each value to its
    /// subscribers in order (or keeps it for those that cannot take it yet). Values handed to
    /// every target now free their slots here; the others when the server reports them.
    public func drainInbox() {
        assertOnLoop()
        inbox.withLock { $0.take(into: &drained) }
        var finished = 0
        // Per drain, not per value: the server (each read retained it, an object with a side
        // table) and whether the handle is published (a hash) while the values are for the same
        // characteristic, as a stream's are.
        guard let gatt else {
            let dropped = drained.count // not started (any more): nobody to send them to
            drained.removeAll(keepingCapacity: true)
            release(dropped)
            return
        }
        var lastPublished: ATTHandle?
        for index in drained.indices {
            // Moved out (an empty value left behind): a copy of each cost a retain and a release.
            var accepted = PeripheralUpdate.moved
            swap(&accepted, &drained[index])
            let handle = accepted.handle
            if handle != lastPublished {
                guard valueHandles.contains(handle) else {
                    finished += 1 // not published (any more): nobody to send it to
                    continue
                }
                lastPublished = handle
            }
            let targets = accepted.centrals.map { centrals in
                centrals.compactMap { central -> (any GATTServerConnection)? in linksByCentral[central]?.gattConnection }
            }
            if gatt.updateValue(AppValue(data: accepted.takeValue()), forCharacteristic: handle, onlyTo: targets,
                                owner: updateOwner) {
                finished += 1
            }
        }
        drained.removeAll(keepingCapacity: true)
        release(finished)
    }

    /// Updates of this client's that had to wait were handed over (or dropped).
    public func device(_ device: HostDevice, updatesHandedOver count: Int) { release(count) }

    /// Returns slots to `acceptUpdate`; the readiness event follows when it was owed.
    private func release(_ count: Int) {
        guard count > 0 else { return }
        updatesReleased?(count)
        guard inbox.withLock({ $0.release(count) }) else { return }
        events?.peripheralReadyToUpdateSubscribers(self)
    }
}

/// The app's value as it gave it: a notification is encoded straight from its bytes, and one
/// that waits keeps the `Data`.
private struct AppValue: GATTValueBytes {
    /// No more than the bytes: an existential's inline buffer holds three words, and a larger
    /// value waiting in a queue is boxed (an allocation).
    let data: Data
    func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool { data.withUnsafeBytes { body($0) } }
}
