import ATT
import AssignedNumbers
import Foundation
import GAP
import GATT
import HCI
import HCITransport
import HCIDriver
import HostDevice
import HostStack
import L2CAP
import Scheduling

/// The loop side of a `CBPeripheralManager`, a client of its host device in the peripheral
/// role: its services in the device's one GATT database (requests for them come here; the
/// server sends the updates the app gave and keeps who subscribed), its advertising set, one
/// link per central that connected or used its services, and pending requests.
///
/// Loop-confined, except `inbox` and `outstanding` (behind their locks), which the app's
/// threads use without waiting for the loop.
final class PeripheralEngine: HostDeviceClient, @unchecked Sendable {
    @exclusivity(unchecked) weak var manager: CBPeripheralManager?

    // MARK: Shared with the app's threads

    /// Values `updateValue` accepted, waiting for the loop.
    let inbox = Locked(UpdateInbox())
    /// Requests handed to the delegate and not answered yet (their transaction numbers).
    let outstanding = Locked(Set<Int>())

    // MARK: Loop-confined

    @exclusivity(unchecked) private var device: HostDevice?
    @exclusivity(unchecked) private var gatt: GATTServer?
    /// Whose count the device's GATT server reports this client's handed-over updates under.
    @exclusivity(unchecked) private var updateOwner = 0
    @exclusivity(unchecked) private var links = IntegerKeyMap<ObjectIdentifier, Link>()
    @exclusivity(unchecked) private var linksByHandle: [ConnectionHandle: Link] = [:]
    @exclusivity(unchecked) private var linksByCentral: [ObjectIdentifier: Link] = [:]

    @exclusivity(unchecked) private var published: [ObjectIdentifier: PublishedService] = [:]
    @exclusivity(unchecked) private var characteristicsByHandle: [ATTHandle: CBMutableCharacteristic] = [:]
    @exclusivity(unchecked) private var handlesByCharacteristic = IntegerKeyMap<ObjectIdentifier, ATTHandle>()

    @exclusivity(unchecked) private var nextTransaction = 0
    @exclusivity(unchecked) private var pendingAnswers: [Int: PendingAnswer] = [:]

    @exclusivity(unchecked) private var advertising = AdvertisingState.off
    @exclusivity(unchecked) private var advertisingParameters: AdvertisingParameters?

    @exclusivity(unchecked) private var drained: [AcceptedUpdate] = []

    final class Link: ATTBearerListener {
        let connection: DeviceConnection
        let bearer: ATTBearer
        let gattConnection: GATTBearerConnection
        let central: CBCentral
        @exclusivity(unchecked) weak var engine: PeripheralEngine?
        @exclusivity(unchecked) var isOpen = true

        init(connection: DeviceConnection, bearer: ATTBearer, gattConnection: GATTBearerConnection, central: CBCentral) {
            self.connection = connection
            self.bearer = bearer
            self.gattConnection = gattConnection
            self.central = central
        }

        func attBearerMTUDidChange(to mtu: Int) {
            let central = central
            synchronized { central.maximumUpdateValueLengthStorage = ATTMTU.maximumNotificationValueLength(mtu: mtu) }
        }
    }

    struct PublishedService {
        let service: CBMutableService
        let id: GATTServiceID
        let included: [ObjectIdentifier]
        let characteristics: [(CBMutableCharacteristic, ATTHandle)]
    }

    enum PendingAnswer {
        case read(link: ObjectIdentifier, respond: (Result<[UInt8], ATTErrorCode>) -> Void)
        case write(link: ObjectIdentifier, respond: (ATTErrorCode?) -> Void)

        var link: ObjectIdentifier {
            switch self {
            case .read(let link, _), .write(let link, _): link
            }
        }
    }

    enum AdvertisingState { case off, starting, on }

    // MARK: - Power

    /// Whether the device is on (the engine is its client). Loop-confined.
    var isOn: Bool { device != nil }

    func deviceDidStart(_ device: HostDevice) {
        self.device = device
        device.addClient(self, roles: .peripheral)
        gatt = device.gattServer
        updateOwner = device.updateOwner(of: self) ?? 0
    }

    /// The controller went away: connections end (each subscription with its unsubscribe),
    /// advertising stops, and the services are gone, as Core Bluetooth does below poweredOff.
    func deviceDidStop() {
        for link in Array(links.values) { closeLink(link) }
        device = nil
        gatt = nil
        advertising = .off
        advertisingParameters = nil
        manager?.setAdvertisingFlag(false)
        for record in published.values { forgetHandles(record) }
        published = [:]
        characteristicsByHandle = [:]
        handlesByCharacteristic = [:]
        inbox.withLock { $0.reset() }
    }

    // MARK: - Delivering to the app

    /// Runs `body` on the delegate queue with the manager and its delegate.
    private func deliver(_ body: @escaping @Sendable (CBPeripheralManager, CBPeripheralManagerDelegate?) -> Void) {
        guard let manager else { return }
        manager.callbacks.async { [weak manager] in
            guard let manager else { return }
            body(manager, manager.delegate)
        }
    }

    // MARK: - Services

    func publish(_ blueprint: ServiceBlueprint) {
        let service = blueprint.service
        guard let device else { return }
        func fail(_ error: CBError) {
            APIMisuse.report("add(_:) of service \(service.uuid): \(error.userInfo[NSLocalizedDescriptionKey] as? String ?? "\(error.code)")")
            deliver { manager, delegate in delegate?.peripheralManager(manager, didAdd: service, error: error) }
        }
        guard published[ObjectIdentifier(service)] == nil else {
            return fail(ServiceBlueprint.invalid("service \(service.uuid) is already published"))
        }
        for characteristic in blueprint.characteristics where handlesByCharacteristic[ObjectIdentifier(characteristic)] != nil {
            return fail(ServiceBlueprint.invalid("characteristic \(characteristic.uuid) already belongs to a published service"))
        }
        var includedIDs: [GATTServiceID] = []
        var included: [ObjectIdentifier] = []
        for other in blueprint.includedServices {
            guard let record = published[ObjectIdentifier(other)] else {
                return fail(ServiceBlueprint.invalid("service \(service.uuid) includes service \(other.uuid), which is not published; add it first"))
            }
            includedIDs.append(record.id)
            included.append(ObjectIdentifier(other))
        }
        var definition = blueprint.gattService
        definition.includedServices = includedIDs
        let handles: GATTServiceHandles
        do throws(GATTDatabaseError) {
            handles = try device.addService(definition, for: self)
        } catch {
            let code: CBError.Code = error == .outOfHandles ? .outOfSpace : .invalidParameters
            return fail(CBError(code, userInfo: [NSLocalizedDescriptionKey: "service \(service.uuid) cannot be published: \(error)"]))
        }
        var characteristics: [(CBMutableCharacteristic, ATTHandle)] = []
        for (characteristic, placed) in zip(blueprint.characteristics, handles.characteristics) {
            characteristics.append((characteristic, placed.value))
            characteristicsByHandle[placed.value] = characteristic
            handlesByCharacteristic[ObjectIdentifier(characteristic)] = placed.value
        }
        let record = PublishedService(service: service, id: handles.id, included: included, characteristics: characteristics)
        published[ObjectIdentifier(service)] = record
        let range = handles.range
        let valueHandles = zip(blueprint.characteristics, handles.characteristics).map { ($0, $1) }
        deliver { manager, delegate in
            synchronized {
                service.handleRange = range.lowerBound.rawValue...range.upperBound.rawValue
                for (characteristic, placed) in valueHandles {
                    characteristic.declarationHandle = placed.declaration.rawValue
                    characteristic.valueHandle = placed.value.rawValue
                }
            }
            delegate?.peripheralManager(manager, didAdd: service, error: nil)
        }
    }

    func unpublish(_ service: CBMutableService) {
        guard let device else { return }
        let key = ObjectIdentifier(service)
        guard let record = published[key] else {
            APIMisuse.report("remove(_:) of service \(service.uuid), which is not published")
            return
        }
        if let includer = published.values.first(where: { $0.included.contains(key) }) {
            APIMisuse.report("remove(_:) of service \(service.uuid), which published service \(includer.service.uuid) includes; remove that one first")
            return
        }
        do throws(GATTDatabaseError) {
            try device.removeService(record.id, for: self)
        } catch {
            APIMisuse.report("remove(_:) of service \(service.uuid): \(error)")
            return
        }
        drop(record)
    }

    func unpublishAll() {
        guard let device else { return }
        device.removeAllServices(for: self)
        for record in published.values { drop(record) }
    }

    /// Forgets a removed service's handles (the server dropped the updates still queued for it).
    private func drop(_ record: PublishedService) {
        published[ObjectIdentifier(record.service)] = nil
        for (characteristic, handle) in record.characteristics {
            characteristicsByHandle[handle] = nil
            handlesByCharacteristic[ObjectIdentifier(characteristic)] = nil
        }
        forgetHandles(record)
    }

    private func forgetHandles(_ record: PublishedService) {
        let service = record.service
        let characteristics = record.characteristics.map(\.0)
        synchronized {
            service.handleRange = nil
            for characteristic in characteristics {
                characteristic.declarationHandle = 0
                characteristic.valueHandle = 0
                characteristic.subscribedCentralsStorage = nil
            }
        }
    }

    // MARK: - Advertising

    /// `manufacturerData` (the Linux extension: company identifier little-endian, then data)
    /// alone makes a beacon: non-connectable, non-scannable, all in the advertisement.
    func startAdvertising(name: String?, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt8]? = nil) {
        guard let device, let gatt else { return }
        guard advertising == .off else {
            let error = CBError(.alreadyAdvertising)
            deliver { manager, delegate in delegate?.peripheralManagerDidStartAdvertising(manager, error: error) }
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
            let error = CBError(.invalidParameters, userInfo: [
                NSLocalizedDescriptionKey: "the manufacturer data (\(manufacturerData?.count ?? 0) bytes) does not fit in the advertisement",
            ])
            deliver { manager, delegate in delegate?.peripheralManagerDidStartAdvertising(manager, error: error) }
            return
        }
        if !packed.overflowServiceUUIDs.isEmpty {
            StackLog.log("advertising: service UUIDs \(packed.overflowServiceUUIDs) do not fit and are not advertised (overflow area)")
        }
        // From the device's static random address (set when it starts), as phones advertise.
        let parameters = AdvertisingParameters(connectable: !beacon, scannable: !beacon, intervalMin: 0x00A0, intervalMax: 0x00A0,
                                               data: packed.advertisingData.encoded, scanResponse: packed.scanResponse.encoded,
                                               ownRandomAddress: device.host.randomAddress != nil)
        if let name, !name.isEmpty { gatt.deviceName = String(name.prefix(248)) }
        advertising = .starting
        advertisingParameters = parameters
        device.startAdvertising(parameters, for: self) { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                if advertising == .starting {
                    advertising = .on
                    manager?.setAdvertisingFlag(true)
                } else {
                    // Stopped while starting: make sure the controller is quiet.
                    self.device?.stopAdvertising(for: self)
                }
                deliver { manager, delegate in delegate?.peripheralManagerDidStartAdvertising(manager, error: nil) }
            case .failure(let failure):
                if advertising == .starting { advertising = .off }
                StackLog.log("advertising could not start: \(failure)")
                let error = CBError(.unknown, userInfo: [NSLocalizedDescriptionKey: "the controller refused to advertise: \(failure)"])
                deliver { manager, delegate in delegate?.peripheralManagerDidStartAdvertising(manager, error: error) }
            }
        }
    }

    func stopAdvertising() {
        manager?.setAdvertisingFlag(false)
        guard advertising != .off else { return }
        advertising = .off
        advertisingParameters = nil
        device?.stopAdvertising(for: self) { result in
            if case .failure(let error) = result { StackLog.log("stopping advertising failed: \(error)") }
        }
    }

    /// Legacy connectable advertising stopped because a central connected: Core Bluetooth keeps
    /// advertising while connected, so it starts again unless the app stopped it.
    func deviceDidStopAdvertising(_ device: HostDevice) {
        guard advertising == .on, let parameters = advertisingParameters else { return }
        device.startAdvertising(parameters, for: self) { [weak self] result in
            guard let self, case .failure(let error) = result, advertising == .on else { return }
            StackLog.log("advertising could not resume while connected: \(error)")
            advertising = .off
            advertisingParameters = nil
            manager?.setAdvertisingFlag(false)
            self.device?.stopAdvertising(for: self)
        }
    }

    // MARK: - Connections

    /// A central connected to the device (every peripheral client of the device hears it).
    func device(_ device: HostDevice, didConnect connection: DeviceConnection) {
        _ = link(for: connection)
    }

    /// The link for a connection: made when a central connects, or when a connection the
    /// device made otherwise (as central) first uses this manager's services.
    private func link(for connection: DeviceConnection) -> Link? {
        if let link = links[ObjectIdentifier(connection.serverConnection)] { return link }
        guard connection.isOpen, let manager else { return nil }
        let bearer = connection.bearer
        let central = CBCentral(identifier: (manager.device?.identifiers ?? .persistent).identifier(for: connection.peer),
                                maximumUpdateValueLength: ATTMTU.maximumNotificationValueLength(mtu: bearer.mtu))
        let link = Link(connection: connection, bearer: bearer, gattConnection: connection.serverConnection, central: central)
        link.engine = self
        links[ObjectIdentifier(connection.serverConnection)] = link
        linksByHandle[connection.handle] = link
        linksByCentral[ObjectIdentifier(central)] = link
        bearer.addListener(link)
        return link
    }

    func device(_ device: HostDevice, didDisconnect connection: DeviceConnection, reason: HCIStatus) {
        guard let link = linksByHandle[connection.handle], link.connection === connection else { return }
        closeLink(link)
    }

    func device(_ device: HostDevice, didClose error: HCITransportError?) {
        manager?.hostDidClose(error)
    }

    /// The link is gone: its subscriptions end (the server reports each), its unanswered
    /// requests are forgotten, and updates waiting for it no longer do (the server drops them).
    private func closeLink(_ link: Link) {
        guard link.isOpen else { return }
        link.isOpen = false
        link.bearer.removeListener(link)
        let key = ObjectIdentifier(link.gattConnection)
        links[key] = nil
        linksByHandle[link.connection.handle] = nil
        linksByCentral[ObjectIdentifier(link.central)] = nil
        let abandoned = pendingAnswers.filter { $0.value.link == key }.map(\.key)
        for id in abandoned { pendingAnswers[id] = nil }
        if !abandoned.isEmpty { outstanding.withLock { $0.subtract(abandoned) } }
    }

    func setDesiredConnectionLatency(_ latency: CBPeripheralManagerConnectionLatency, for central: CBCentral) {
        guard let device else { return }
        guard let link = linksByCentral[ObjectIdentifier(central)] else {
            APIMisuse.report("setDesiredConnectionLatency(_:for:) for a central that is not connected")
            return
        }
        // Intervals in 1.25 ms units, supervision timeout in 10 ms units.
        let parameters: ConnectionParameters
        switch latency {
        case .low: parameters = ConnectionParameters(intervalMin: 0x0006, intervalMax: 0x000C, latency: 0, timeout: 0x01F4)
        case .medium: parameters = ConnectionParameters(intervalMin: 0x0018, intervalMax: 0x0028, latency: 0, timeout: 0x01F4)
        case .high: parameters = ConnectionParameters(intervalMin: 0x0050, intervalMax: 0x0078, latency: 0, timeout: 0x0258)
        }
        device.updateParameters(link.connection, parameters) { result in
            if case .failure(let error) = result { StackLog.log("connection parameter update refused: \(error)") }
        }
    }

    // MARK: - Requests

    func device(_ device: HostDevice, read request: GATTReadRequest, on connection: DeviceConnection,
                respond: @escaping (Result<[UInt8], ATTErrorCode>) -> Void) {
        let key = ObjectIdentifier(request.connection)
        guard let link = link(for: connection), let characteristic = characteristicsByHandle[request.handle] else {
            return respond(.failure(.unlikelyError))
        }
        nextTransaction += 1
        let id = nextTransaction
        pendingAnswers[id] = .read(link: key, respond: respond)
        outstanding.withLock { _ = $0.insert(id) }
        let attRequest = CBATTRequest(central: link.central, characteristic: characteristic, offset: request.offset,
                                      value: nil, transaction: id)
        deliver { manager, delegate in delegate?.peripheralManager(manager, didReceiveRead: attRequest) }
    }

    func device(_ device: HostDevice, write requests: [GATTWriteRequest], on connection: DeviceConnection,
                respond: @escaping (ATTErrorCode?) -> Void) {
        guard let first = requests.first, let link = link(for: connection) else {
            return respond(.unlikelyError)
        }
        var characteristics: [CBMutableCharacteristic] = []
        for request in requests {
            guard let characteristic = characteristicsByHandle[request.handle] else { return respond(.unlikelyError) }
            characteristics.append(characteristic)
        }
        let id: Int
        if first.isCommand {
            // Nobody waits for the answer to a Write Command: the app's one is ignored.
            id = -1
            respond(nil)
        } else {
            nextTransaction += 1
            id = nextTransaction
            pendingAnswers[id] = .write(link: ObjectIdentifier(first.connection), respond: respond)
            outstanding.withLock { _ = $0.insert(id) }
        }
        let attRequests = zip(requests, characteristics).map { request, characteristic in
            CBATTRequest(central: link.central, characteristic: characteristic, offset: request.offset,
                         value: Data(request.value), transaction: id)
        }
        deliver { manager, delegate in delegate?.peripheralManager(manager, didReceiveWrite: attRequests) }
    }

    /// The app answered request `id` (already taken out of `outstanding`).
    func answer(_ id: Int, _ result: CBATTError.Code, value: Data?) {
        guard let pending = pendingAnswers.removeValue(forKey: id) else { return }
        let error: ATTErrorCode? = result == .success ? nil : ATTErrorCode(rawValue: UInt8(truncatingIfNeeded: result.rawValue))
        switch pending {
        case .read(_, let respond):
            if let error { respond(.failure(error)) } else { respond(.success(value.map { $0.byteArray } ?? [])) }
        case .write(_, let respond):
            respond(error)
        }
    }

    // MARK: - Subscriptions

    func device(_ device: HostDevice, subscriptionChanged configuration: GATTClientConfiguration,
                from old: GATTClientConfiguration, forCharacteristic handle: ATTHandle, on connection: DeviceConnection) {
        let link = configuration.isEmpty ? linksByHandle[connection.handle] : self.link(for: connection)
        guard let link, link.connection === connection, let characteristic = characteristicsByHandle[handle] else { return }
        let central = link.central
        if old.isEmpty && !configuration.isEmpty {
            deliver { manager, delegate in
                synchronized {
                    var centrals = characteristic.subscribedCentralsStorage ?? []
                    if !centrals.contains(where: { $0 === central }) { centrals.append(central) }
                    characteristic.subscribedCentralsStorage = centrals
                }
                delegate?.peripheralManager(manager, central: central, didSubscribeTo: characteristic)
            }
        } else if !old.isEmpty && configuration.isEmpty {
            deliver { manager, delegate in
                synchronized { characteristic.subscribedCentralsStorage?.removeAll { $0 === central } }
                delegate?.peripheralManager(manager, central: central, didUnsubscribeFrom: characteristic)
            }
        }
    }

    // MARK: - Notifications and indications

    /// Hands what `updateValue` accepted to the GATT server, which sends each value to its
    /// subscribers in order (or keeps it for those that cannot take it yet). Values handed to
    /// every target now free their slots here; the others when the server reports them.
    func drainInbox() {
        inbox.withLock { $0.take(into: &drained) }
        var finished = 0
        for accepted in drained {
            guard let gatt, let handle = handlesByCharacteristic[ObjectIdentifier(accepted.characteristic)] else {
                finished += 1 // not published (any more): nobody to send it to
                continue
            }
            let targets = accepted.centrals.map { centrals in
                centrals.compactMap { central -> (any GATTServerConnection)? in linksByCentral[ObjectIdentifier(central)]?.gattConnection }
            }
            if gatt.updateValue(AppValue(data: accepted.value), forCharacteristic: handle, onlyTo: targets, owner: updateOwner) {
                finished += 1
            }
        }
        drained.removeAll(keepingCapacity: true)
        release(finished)
    }

    /// Updates of this client's that had to wait were handed over (or dropped).
    func device(_ device: HostDevice, updatesHandedOver count: Int) { release(count) }

    /// Returns slots to `updateValue`; the readiness callback follows when it was owed.
    private func release(_ count: Int) {
        guard count > 0 else { return }
        guard inbox.withLock({ $0.release(count) }) else { return }
        deliver { manager, delegate in delegate?.peripheralManagerIsReady(toUpdateSubscribers: manager) }
    }
}

/// The app's value as it gave it: a notification is encoded straight from its bytes, and one
/// that waits keeps the `Data`.
private struct AppValue: GATTValueBytes {
    let data: Data
    func withValueBytes(_ body: (UnsafeRawBufferPointer) -> Bool) -> Bool { data.withUnsafeBytes { body($0) } }
}
