import ATT
import AssignedNumbers
import Bonding
import DaemonProtocol
import Foundation
import GATT
import HCI
import HCITransport
import HostDevice
import RemoteRoles
import RoleServices
import Scheduling

/// The API side of the peripheral role: keeps the app's objects for what the role service names
/// by value (services by key, characteristics by value handle, centrals by id), turns the
/// service's events into `CBCentral`s, `CBATTRequest`s, errors and delegate calls on the
/// manager's queue, and checks the app's services before they become values for the service.
///
/// Loop-confined (called on the device's loop, by the service or the manager's loop jobs),
/// except `outstanding` (behind its lock), which `respond(to:withResult:)` uses on any thread.
final class PeripheralEvents: PeripheralServiceEvents, @unchecked Sendable {
    @WeakHeld var manager: CBPeripheralManager?

    /// Requests handed to the delegate and not answered yet (their ids).
    let outstanding = Locked(Set<Int>())

    /// Connected centrals by id. Each one's `CBCentral`, and with it its identifier (an entry
    /// of the manager's identifier store), is made when the app first meets it (a request, a
    /// subscription, a channel): most links of a fleet never do, and each costs ~400 bytes.
    @exclusivity(unchecked) private var centrals: [Int: ConnectedCentral] = [:]  // exclusivity checks: 0.14 % of pair

    private enum ConnectedCentral {
        case connected(peer: LEAddress, mtu: Int)
        case made(CBCentral)
    }

    /// The `CBCentral` for `id`, made at the first call.
    private func central(_ id: Int) -> CBCentral? {
        switch centrals[id] {
        case nil: return nil
        case .made(let central): return central
        case .connected(let peer, let mtu):
            guard let manager else { return nil }
            let central = CBCentral(identifier: manager.identifierStore.assignIdentifier(for: peer), centralID: id,
                                    maximumUpdateValueLength: ATTMTU.maximumNotificationValueLength(mtu: mtu),
                                    manager: manager)
            centrals[id] = .made(central)
            return central
        }
    }

    private var nextKey = 0
    private var keysByService: [ObjectIdentifier: Int] = [:]
    @exclusivity(unchecked) private var published: [Int: PublishedService] = [:]  // exclusivity checks: 0.1 % of pair
    /// Services handed to the role service, waiting for its `didPublish`.
    private var publishing: [Int: ServiceBlueprint] = [:]
    private var characteristicsByHandle: [ATTHandle: CBMutableCharacteristic] = [:]
    @exclusivity(unchecked) private var handlesByCharacteristic = IntegerKeyMap<ObjectIdentifier, ATTHandle>()  // exclusivity checks: 0.1 % of pair

    struct PublishedService {
        let service: CBMutableService
        let characteristics: [(CBMutableCharacteristic, ATTHandle)]
    }

    /// On the manager's delegate queue: `update`, then `body` for the delegate and the taps.
    private func deliver(updating update: (@Sendable () -> Void)? = nil,
                         _ body: @escaping @Sendable (CBPeripheralManager, CBPeripheralManagerDelegate) -> Void) {
        manager?.deliver(updating: update, body)
    }

    /// The device stopped (after the service's `deviceDidStop`): advertising is off and the
    /// services are gone.
    func deviceDidStop() {
        manager?.setAdvertisingFlag(false)
        for record in published.values { forgetHandles(record) }
        published = [:]
        keysByService = [:]
        publishing = [:]
        characteristicsByHandle = [:]
        handlesByCharacteristic = [:]
        centrals = [:]
    }

    /// Whether `central` is one of this manager's connected centrals.
    func isConnected(_ central: CBCentral) -> Bool {
        guard case .made(let connected) = centrals[central.centralID] else { return false }
        return connected === central
    }

    // MARK: - Services

    private func fail(_ service: CBMutableService, _ error: CBError) {
        APIMisuse.report("add(_:) of service \(service.uuid): \(error.userInfo[NSLocalizedDescriptionKey] as? String ?? "\(error.code)")")
        deliver { manager, delegate in delegate.peripheralManager(manager, didAdd: service, error: error) }
    }

    /// Checks the app's objects (not published twice, included services published first), then
    /// hands the service to the role service under a new key.
    func publish(_ blueprint: ServiceBlueprint, on roleService: any PeripheralRole) {
        let service = blueprint.service
        guard keysByService[ObjectIdentifier(service)] == nil, !publishing.values.contains(where: { $0.service === service }) else {
            return fail(service, ServiceBlueprint.invalid("service \(service.uuid) is already published"))
        }
        let pendingCharacteristics = publishing.values.flatMap(\.characteristics)
        for characteristic in blueprint.characteristics
        where handlesByCharacteristic[ObjectIdentifier(characteristic)] != nil || pendingCharacteristics.contains(where: { $0 === characteristic }) {
            return fail(service, ServiceBlueprint.invalid("characteristic \(characteristic.uuid) already belongs to a published service"))
        }
        var included: [Int] = []
        for other in blueprint.includedServices {
            // A service handed over and not answered yet counts: a daemon's role answers
            // later, and publishes in order (it fails this one if that one failed).
            let pending = publishing.first { $0.value.service === other }?.key
            guard let key = keysByService[ObjectIdentifier(other)] ?? pending else {
                return fail(service, ServiceBlueprint.invalid("service \(service.uuid) includes service \(other.uuid), which is not published; add it first"))
            }
            included.append(key)
        }
        nextKey += 1
        publishing[nextKey] = blueprint
        roleService.publish(blueprint.gattService, key: nextKey, includedKeys: included)
    }

    func peripheral(_ roleService: any PeripheralRole, didPublish key: Int, result: Result<GATTServiceHandles, PeripheralPublishError>) {
        guard let blueprint = publishing.removeValue(forKey: key) else { return }
        let service = blueprint.service
        let handles: GATTServiceHandles
        switch result {
        case .success(let placed):
            handles = placed
        case .failure(.alreadyPublished):
            return fail(service, ServiceBlueprint.invalid("service \(service.uuid) is already published"))
        case .failure(.includedServiceNotPublished):
            return fail(service, ServiceBlueprint.invalid("service \(service.uuid) includes a service which is not published; add it first"))
        case .failure(.database(let error)):
            let code: CBError.Code = error == .outOfHandles ? .outOfSpace : .invalidParameters
            return fail(service, CBError(code, userInfo: [NSLocalizedDescriptionKey: "service \(service.uuid) cannot be published: \(error)"]))
        }
        var characteristics: [(CBMutableCharacteristic, ATTHandle)] = []
        for (characteristic, placed) in zip(blueprint.characteristics, handles.characteristics) {
            characteristics.append((characteristic, placed.value))
            characteristicsByHandle[placed.value] = characteristic
            handlesByCharacteristic[ObjectIdentifier(characteristic)] = placed.value
        }
        keysByService[ObjectIdentifier(service)] = key
        published[key] = PublishedService(service: service, characteristics: characteristics)
        let range = handles.range
        let valueHandles = zip(blueprint.characteristics, handles.characteristics).map { ($0, $1) }
        let placeHandles: @Sendable () -> Void = {
            // The app's objects, each under its own lock (``ObjectLock``).
            service.synchronized { service.handleRange = range.lowerBound.rawValue...range.upperBound.rawValue }
            for (characteristic, placed) in valueHandles {
                characteristic.synchronized {
                    characteristic.declarationHandle = placed.declaration.rawValue
                    characteristic.valueHandle = placed.value.rawValue
                }
            }
        }
        deliver(updating: placeHandles) { manager, delegate in delegate.peripheralManager(manager, didAdd: service, error: nil) }
    }

    func unpublish(_ service: CBMutableService, on roleService: any PeripheralRole) {
        guard let key = keysByService[ObjectIdentifier(service)] else {
            APIMisuse.report("remove(_:) of service \(service.uuid), which is not published")
            return
        }
        roleService.unpublish(key)
    }

    func peripheral(_ roleService: any PeripheralRole, didUnpublish key: Int, error: PeripheralUnpublishError?) {
        guard let record = published[key] else { return }
        let service = record.service
        switch error {
        case nil:
            drop(key, record)
        case .notPublished?:
            APIMisuse.report("remove(_:) of service \(service.uuid), which is not published")
        case .included(let includer)?:
            let uuid = published[includer].map { "\($0.service.uuid)" } ?? "?"
            APIMisuse.report("remove(_:) of service \(service.uuid), which published service \(uuid) includes; remove that one first")
        case .database(let error)?:
            APIMisuse.report("remove(_:) of service \(service.uuid): \(error)")
        }
    }

    private func drop(_ key: Int, _ record: PublishedService) {
        published[key] = nil
        keysByService[ObjectIdentifier(record.service)] = nil
        for (characteristic, handle) in record.characteristics {
            characteristicsByHandle[handle] = nil
            handlesByCharacteristic[ObjectIdentifier(characteristic)] = nil
        }
        forgetHandles(record)
    }

    private func forgetHandles(_ record: PublishedService) {
        let service = record.service
        let characteristics = record.characteristics.map(\.0)
        service.synchronized { service.handleRange = nil }
        for characteristic in characteristics {
            characteristic.synchronized {
                characteristic.declarationHandle = 0
                characteristic.valueHandle = 0
                characteristic.subscribedCentralsStorage = nil
            }
        }
    }

    // MARK: - Advertising

    func peripheral(_ roleService: any PeripheralRole, didStartAdvertising error: PeripheralAdvertisingError?, isOn: Bool) {
        let cbError: CBError? = switch error {
        case nil: nil
        case .alreadyAdvertising?: CBError(.alreadyAdvertising)
        case .manufacturerDataDoesNotFit(let count)?:
            CBError(.invalidParameters, userInfo: [
                NSLocalizedDescriptionKey: "the manufacturer data (\(count) bytes) does not fit in the advertisement",
            ])
        case .refused(let failure)?:
            CBError(.unknown, userInfo: [NSLocalizedDescriptionKey: "the controller refused to advertise: \(failure)"])
        }
        if isOn { manager?.setAdvertisingFlag(true) }
        deliver { manager, delegate in delegate.peripheralManagerDidStartAdvertising(manager, error: cbError) }
    }

    func peripheralAdvertisingStopped(_ roleService: any PeripheralRole) {
        manager?.setAdvertisingFlag(false)
    }

    // MARK: - Centrals

    func peripheral(_ roleService: any PeripheralRole, centralConnected central: Int, peer: LEAddress, mtu: Int) {
        centrals[central] = .connected(peer: peer, mtu: mtu)
    }

    func peripheral(_ roleService: any PeripheralRole, central: Int, mtuChanged mtu: Int) {
        switch centrals[central] {
        case nil: return
        case .connected(let peer, _): centrals[central] = .connected(peer: peer, mtu: mtu)
        case .made(let central):
            central.synchronized { central.maximumUpdateValueLengthStorage = ATTMTU.maximumNotificationValueLength(mtu: mtu) }
        }
    }

    func peripheral(_ roleService: any PeripheralRole, centralDisconnected central: Int, abandonedRequests: [Int]) {
        centrals[central] = nil
        if !abandonedRequests.isEmpty { outstanding.withLock { $0.subtract(abandonedRequests) } }
    }

    func peripheral(_ roleService: any PeripheralRole, deviceDidClose error: HCITransportError?) {
        manager?.hostDidClose(error)
    }

    func peripheralDeviceWillReset(_ roleService: any PeripheralRole) {
        manager?.hostWillReset()
    }

    func peripheralDeviceDidReset(_ roleService: any PeripheralRole) {
        manager?.hostDidReset()
    }

    // MARK: - Requests

    func peripheral(_ roleService: any PeripheralRole, readRequest id: Int, central: Int, handle: ATTHandle, offset: Int) {
        guard let central = self.central(central), let characteristic = characteristicsByHandle[handle] else {
            return roleService.answer(id, error: .unlikelyError, value: nil)
        }
        outstanding.withLock { _ = $0.insert(id) }
        let request = CBATTRequest(central: central, characteristic: characteristic, offset: offset, value: nil, transaction: id)
        deliver { manager, delegate in delegate.peripheralManager(manager, didReceiveRead: request) }
    }

    func peripheral(_ roleService: any PeripheralRole, writeRequest id: Int, writes: [PeripheralWrite]) {
        var requests: [CBATTRequest] = []
        requests.reserveCapacity(writes.count)
        for write in writes {
            guard let central = self.central(write.central), let characteristic = characteristicsByHandle[write.handle] else {
                if id >= 0 { roleService.answer(id, error: .unlikelyError, value: nil) }
                return
            }
            requests.append(CBATTRequest(central: central, characteristic: characteristic, offset: write.offset,
                                         value: Data(write.value), transaction: id))
        }
        if id >= 0 { outstanding.withLock { _ = $0.insert(id) } }
        let attRequests = requests
        deliver { manager, delegate in delegate.peripheralManager(manager, didReceiveWrite: attRequests) }
    }

    // MARK: - Subscriptions and updates

    func peripheral(_ roleService: any PeripheralRole, central: Int, subscribedTo handle: ATTHandle) {
        guard let central = self.central(central), let characteristic = characteristicsByHandle[handle] else { return }
        let addCentral: @Sendable () -> Void = {
            characteristic.synchronized {
                var centrals = characteristic.subscribedCentralsStorage ?? []
                if !centrals.contains(where: { $0 === central }) { centrals.append(central) }
                characteristic.subscribedCentralsStorage = centrals
            }
        }
        deliver(updating: addCentral) { manager, delegate in
            delegate.peripheralManager(manager, central: central, didSubscribeTo: characteristic)
        }
    }

    func peripheral(_ roleService: any PeripheralRole, central: Int, unsubscribedFrom handle: ATTHandle) {
        guard let central = self.central(central), let characteristic = characteristicsByHandle[handle] else { return }
        let removeCentral: @Sendable () -> Void = {
            characteristic.synchronized { characteristic.subscribedCentralsStorage?.removeAll { $0 === central } }
        }
        deliver(updating: removeCentral) { manager, delegate in
            delegate.peripheralManager(manager, central: central, didUnsubscribeFrom: characteristic)
        }
    }

    // MARK: - Channels

    func peripheral(_ roleService: any PeripheralRole, central: Int, didOpen channel: RoleChannel) {
        guard let central = self.central(central), roleService.isOn, let loop = manager?.roleLoop else { return channel.close() }
        let opened = ChannelBridge.makeChannel(channel, peer: central, loop: loop)
        deliver { manager, delegate in delegate.peripheralManager(manager, didOpen: opened, error: nil) }
    }

    func peripheralReadyToUpdateSubscribers(_ roleService: any PeripheralRole) {
        deliver { manager, delegate in delegate.peripheralManagerIsReady(toUpdateSubscribers: manager) }
    }
}

// MARK: - Restoration

extension PeripheralEvents {
    /// On the loop, before the first state: what `corebluetoothd` kept for this manager's
    /// restore identifier when an earlier process went. Makes the app's objects again — each
    /// service a `CBMutableService` with its characteristics (their cached values, properties,
    /// permissions, descriptors, handles, and `subscribedCentrals` as the daemon has them), the
    /// centrals connected — takes them as this manager's published services under the keys the
    /// daemon knows them by, and returns `peripheralManager(_:willRestoreState:)`'s dictionary
    /// with Apple's keys.
    func restore(_ restored: RemotePeripheralRole.Restored) -> [String: Any] {
        guard let manager else { return [:] }
        let identifiers = manager.identifierStore
        for central in restored.centrals {
            let id = Int(central.central)
            centrals[id] = .made(CBCentral(identifier: identifiers.assignIdentifier(for: central.peer), centralID: id,
                                           maximumUpdateValueLength: ATTMTU.maximumNotificationValueLength(mtu: Int(central.mtu)),
                                           manager: manager))
        }
        var objects: [UInt32: CBMutableService] = [:]
        var services: [CBMutableService] = []
        for kept in restored.services {
            let service = CBMutableService(type: CBUUID(bluetoothUUID: kept.service.uuid), primary: kept.service.isPrimary)
            var characteristics: [(CBMutableCharacteristic, ATTHandle)] = []
            for (definition, placed) in zip(kept.service.characteristics, kept.handles.characteristics) {
                let characteristic = Self.characteristic(definition)
                characteristic.synchronized {
                    characteristic.declarationHandle = placed.declaration.rawValue
                    characteristic.valueHandle = placed.value.rawValue
                }
                characteristics.append((characteristic, placed.value))
                characteristicsByHandle[placed.value] = characteristic
                handlesByCharacteristic[ObjectIdentifier(characteristic)] = placed.value
            }
            let range = kept.handles.range
            service.synchronized { service.handleRange = range.lowerBound.rawValue...range.upperBound.rawValue }
            service.characteristics = characteristics.map(\.0)
            let key = Int(kept.key)
            keysByService[ObjectIdentifier(service)] = key
            published[key] = PublishedService(service: service, characteristics: characteristics)
            nextKey = max(nextKey, key)
            objects[kept.key] = service
            services.append(service)
        }
        for kept in restored.services {
            guard let service = objects[kept.key], !kept.includedKeys.isEmpty else { continue }
            service.includedServices = kept.includedKeys.compactMap { objects[$0] }
        }
        for central in restored.centrals {
            guard let object = self.central(Int(central.central)) else { continue }
            for handle in central.subscribed {
                guard let characteristic = characteristicsByHandle[handle] else { continue }
                characteristic.synchronized {
                    characteristic.subscribedCentralsStorage = (characteristic.subscribedCentralsStorage ?? []) + [object]
                }
            }
        }
        var state: [String: Any] = [CBPeripheralManagerRestoredStateServicesKey: services]
        if let advertisement = restored.advertisement {
            manager.setAdvertisingFlag(true)
            state[CBPeripheralManagerRestoredStateAdvertisementDataKey] = Self.advertisementData(advertisement)
        }
        return state
    }

    /// A published characteristic as the app made it (the inverse of `ServiceBlueprint.convert`).
    private static func characteristic(_ definition: GATTCharacteristic) -> CBMutableCharacteristic {
        var properties = CBCharacteristicProperties(rawValue: UInt(definition.properties.rawValue & 0x3E))
        if definition.clientConfigurationPermissions.contains(.writeEncryptionRequired) {
            if properties.contains(.notify) { properties.remove(.notify); properties.insert(.notifyEncryptionRequired) }
            if properties.contains(.indicate) { properties.remove(.indicate); properties.insert(.indicateEncryptionRequired) }
        }
        let permissions = CBAttributePermissions(rawValue: UInt(definition.permissions.rawValue & 0x0F))
        let characteristic = CBMutableCharacteristic(type: CBUUID(bluetoothUUID: definition.uuid), properties: properties,
                                                     value: definition.value.storedBytes.map { Data($0) }, permissions: permissions)
        if !definition.descriptors.isEmpty {
            characteristic.descriptors = definition.descriptors.map { descriptor in
                let bytes = descriptor.value.storedBytes ?? []
                let value: Any = descriptor.uuid == .characteristicUserDescription ? String(decoding: bytes, as: UTF8.self) : Data(bytes)
                return CBMutableDescriptor(type: CBUUID(bluetoothUUID: descriptor.uuid), value: value)
            }
        }
        return characteristic
    }

    /// The dictionary `startAdvertising(_:)` was given, as far as the daemon kept it.
    private static func advertisementData(_ advertisement: DaemonAdvertisement) -> [String: Any] {
        var data: [String: Any] = [:]
        if let name = advertisement.name { data[CBAdvertisementDataLocalNameKey] = name }
        if !advertisement.serviceUUIDs.isEmpty {
            data[CBAdvertisementDataServiceUUIDsKey] = advertisement.serviceUUIDs.map { CBUUID(bluetoothUUID: $0) }
        }
        if let manufacturer = advertisement.manufacturerData { data[CBAdvertisementDataLinuxManufacturerDataKey] = Data(manufacturer) }
        if let raw = advertisement.raw {
            data[CBAdvertisementDataLinuxAdvertisingDataKey] = Data(raw.advertisement)
            if !raw.scanResponse.isEmpty { data[CBAdvertisementDataLinuxScanResponseDataKey] = Data(raw.scanResponse) }
        }
        return data
    }
}
