import ATT
import AssignedNumbers
import Bonding
import DaemonProtocol
import Foundation
import GATT
import HCI
import RoleServices
import Scheduling

/// A remote peripheral, as a central sees it: made when it is discovered (or retrieved), and
/// the object through which its GATT database is explored and used.
///
/// Discovered services, characteristics and descriptors stay on the object and keep their
/// identity when discovered again. Keep a strong reference while you use it: releasing it
/// cancels its connection, as on iOS.
open class CBPeripheral: CBPeer, @unchecked Sendable {
    // @unchecked: the app-visible state below is guarded by `objectLock`, the central manager's,
    // which the peripheral's services, characteristics and descriptors share (``ObjectLock``).
    /// Weakly (`WeakHeldExistential`: a weak reference gives the app's object a side table, and
    /// each retain and release of it per callback the runtime's slow path).
    @exclusivity(unchecked) private var delegateHeld = WeakHeldExistential<any CBPeripheralDelegate>(wrappedValue: nil)  // under objectLock
    private var delegateStorage: CBPeripheralDelegate? {
        get { delegateHeld.wrappedValue }
        set { delegateHeld.wrappedValue = newValue }
    }
    var nameStorage: String?
    /// The name came from the peripheral's GAP Device Name (advertised names no longer apply).
    var hasGAPName = false
    var linkStateStorage: CBPeripheralState = .disconnected
    var servicesStorage: [CBService]?
    var rssiStorage: NSNumber?
    var mtuStorage = ATTMTU.leDefault
    var advertisedServiceUUIDs: Set<BluetoothUUID> = []
    /// Writes without response the app may still make before `canSendWriteWithoutResponse`
    /// turns false; returned as the link takes them.
    var writeBudget = CBPeripheral.writeBudgetLimit
    var owesWriteReadiness = false
    /// The calls the app made that wait for their callback, oldest first (``begin(_:)``).
    private var pendingCalls: [PendingCall] = []
    /// How many calls were ever accepted (guarded by the lock; tests).
    private var acceptedCallsStorage = 0
    /// Observers hearing the delegate's events too (CoreBluetoothAsync's tap).
    @exclusivity(unchecked) private var taps = EventTaps<CBPeripheralDelegate>()  // exclusivity checks: 0.28 % of notify

    /// The device's address (not shown to the app, as on iOS): where it was discovered, or its
    /// identity once it bonded (``moveIfDisconnected(to:)``).
    var addressStorage: LEAddress
    var address: LEAddress { synchronized { addressStorage } }
    /// The central manager the peripheral belongs to.
    @WeakHeld var manager: CBCentralManager?
    /// The manager's delegate queue, held here so that a callback needs no weak load of the
    /// manager (a weak load per notification, and retains through the object's side table).
    let callbacks: CallbackQueue

    /// Writes without response in flight between the app and the controller.
    static let writeBudgetLimit = 32
    /// Writes without response queued beyond the budget before more are dropped.
    static let writeOverdraftLimit = 4096
    /// The longest value a write with response may carry (a long write), as on iOS.
    static let maximumLongWriteLength = 512

    init(identifier: UUID, address: LEAddress, name: String?, manager: CBCentralManager) {
        nameStorage = name
        addressStorage = address
        self.manager = manager
        callbacks = manager.callbacks
        super.init(identifier: identifier, lock: manager.objectLock)
        linkEvents.peripheral = self
    }

    deinit {
        // Releasing a peripheral cancels what the app started with it: a connection, or an
        // attempt (a reconnection included: `.connecting`). A disconnected one started
        // nothing that is still going, and a scanning app that keeps none of the peripherals it
        // is told about releases one per report: no loop job and no look for another object
        // for the address (a walk of every object when the app holds none) for those.
        // Nothing else holds the object now, so its state is read without the manager's lock.
        guard linkStateStorage != .disconnected else { return }
        manager?.peripheralReleased(address: addressStorage)
    }

    /// What the link tells this object (held here: the link holds it weakly, so a released
    /// peripheral hears nothing more).
    let linkEvents = PeripheralLinkEvents()

    /// Who hears about discovery, values and writes (held weakly).
    open weak var delegate: CBPeripheralDelegate? {
        get { synchronized { delegateStorage } }
        set { synchronized { delegateStorage = newValue } }
    }

    /// Makes `observer` hear every delegate event of this peripheral, on its manager's queue
    /// right after the delegate, until ``removeEventTap(_:)``: CoreBluetoothAsync's way in,
    /// which leaves the app's delegate alone.
    package func addEventTap(_ observer: CBPeripheralDelegate) -> CBEventTapToken {
        synchronized { taps.add(observer) }
    }

    package func removeEventTap(_ token: CBEventTapToken) {
        _ = synchronized { taps.remove(token) }  // released after the lock (EventTaps.remove)
    }

    /// How many observers are on the tap (tests wait for awaits to be under way).
    package var eventTapCount: Int { synchronized { taps.observers.count } }

    /// The central manager the peripheral belongs to (CoreBluetoothAsync hears its
    /// disconnections there).
    package var centralManager: CBCentralManager? { manager }

    /// The peripheral's name: its GAP Device Name once known, else the advertised local name.
    open var name: String? { synchronized { nameStorage } }

    /// The last RSSI read.
    @available(*, deprecated, message: "Use peripheral(_:didReadRSSI:error:)")
    open var rssi: NSNumber? { synchronized { rssiStorage } }

    /// Whether the app's connection is up.
    open var state: CBPeripheralState { synchronized { linkStateStorage } }

    /// The services discovered so far (nil until discovered).
    open var services: [CBService]? { synchronized { servicesStorage } }

    /// Whether a `.withoutResponse` write would be sent now; when false, wait for
    /// `peripheralIsReady(toSendWriteWithoutResponse:)`.
    open var canSendWriteWithoutResponse: Bool {
        synchronized { linkStateStorage == .connected && writeBudget > 0 }
    }

    /// Whether the peripheral authorised ANCS (never on Linux).
    open var ancsAuthorized: Bool { false }

    open override var description: String {
        let (name, state, mtu) = synchronized { (nameStorage, linkStateStorage, mtuStorage) }
        let stateName = ["disconnected", "connecting", "connected", "disconnecting"][state.rawValue]
        return "<CBPeripheral: \(Unmanaged.passUnretained(self).toOpaque()), identifier = \(identifier.uuidString), name = \(name ?? "(null)"), mtu = \(mtu), state = \(stateName)>"
    }

    // MARK: - Plumbing

    /// Whether the peripheral is connected; otherwise `call` is reported as API misuse.
    private func requireConnected(_ call: String) -> Bool {
        guard state == .connected else {
            APIMisuse.report("<CBPeripheral \(identifier.uuidString)> can only accept \(call) while connected")
            return false
        }
        return true
    }

    /// Whether `attribute` belongs to this peripheral (and so shares its lock: the sections
    /// that follow touch it under `synchronized`); otherwise `call` is reported as misuse.
    private func requireOwn(_ service: CBService?, _ call: String) -> Bool {
        guard let service, service.peripheral === self, synchronized({ service.handleRange != nil }) else {
            APIMisuse.report("\(call) with an attribute that does not belong to peripheral \(identifier.uuidString)")
            return false
        }
        return true
    }

    /// Under the lock: the device is now reached at `address` (a peer that bonded, by its
    /// identity). A link keeps the address it was made to, so a connected object keeps it
    /// until the link is gone; an identity never gives way to a private address.
    func moveIfDisconnected(to address: LEAddress) {
        let address = address.normalized
        guard linkStateStorage == .disconnected, addressStorage.normalized != address,
              !IdentifierStore.isPrivate(address) || IdentifierStore.isPrivate(addressStorage) else { return }
        addressStorage = address
    }

    /// Runs `body` on the device's loop with the peripheral's link, if it is still up.
    private func onLink(_ body: @escaping @Sendable (any CentralRoleLink, any CentralRole) -> Void) {
        guard let manager else { return }
        let address = self.address
        manager.onService { service in
            guard let link = service.link(for: address), !link.isClosed else { return }
            body(link, service)
        }
    }

    /// Calls the delegate on the manager's queue; `update` runs just before, under the lock.
    func deliver(update: (@Sendable () -> Void)? = nil,
                 _ body: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate) -> Void) {
        // `self` is held until the callback ran (a weak capture costs a side-table entry's
        // traffic per callback); a released peripheral's last callbacks still reach the delegate.
        callbacks.async { [self] in
            let (delegate, observers) = synchronized { () -> (CBPeripheralDelegate?, [CBPeripheralDelegate]) in
                update?()
                return (delegateStorage, taps.observers)
            }
            if let delegate { body(self, delegate) }
            for observer in observers { body(self, observer) }
        }
    }

    /// A call the app made that answers with one delegate callback: registered as the call is
    /// accepted, answered by the first of its outcome and the link's end.
    final class PendingCall: @unchecked Sendable {
        // @unchecked: immutable after init.
        /// The callback with the error of the link's end.
        let fail: @Sendable (CBPeripheral, CBPeripheralDelegate, any Error) -> Void
        init(_ fail: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate, any Error) -> Void) { self.fail = fail }
    }

    /// Registers a call that expects a callback, if the peripheral is connected (the caller
    /// checked it; a disconnection may have come since): nil, and no callback, otherwise.
    /// Every registered call gets exactly one callback, before `didDisconnectPeripheral`: its
    /// outcome, or, if the link ends first, `fail` with the disconnection's error
    /// (``failPendingCalls(with:)``), so that nothing follows `didDisconnectPeripheral`, as
    /// Apple's header promises.
    private func begin(_ fail: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate, any Error) -> Void) -> PendingCall? {
        synchronized {
            guard linkStateStorage == .connected else { return nil }
            let call = PendingCall(fail)
            pendingCalls.append(call)
            acceptedCallsStorage &+= 1
            return call
        }
    }

    /// Under the lock, on the delegate queue: whether `call` still waits, taking it if it does.
    private func take(_ call: PendingCall) -> Bool {
        guard let index = pendingCalls.firstIndex(where: { $0 === call }) else { return false }
        pendingCalls.remove(at: index)
        return true
    }

    /// ``deliver(update:_:)`` for `call`'s outcome: nothing (but `dropped`) if the link's end
    /// answered it first.
    private func deliver(_ call: PendingCall, update: (@Sendable () -> Void)? = nil, dropped: (@Sendable () -> Void)? = nil,
                         _ body: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate) -> Void) {
        callbacks.async { [self] in
            let (answered, delegate, observers) = synchronized { () -> (Bool, CBPeripheralDelegate?, [CBPeripheralDelegate]) in
                guard take(call) else { return (false, nil, []) }
                update?()
                return (true, delegateStorage, taps.observers)
            }
            guard answered else {
                dropped?()
                return
            }
            if let delegate { body(self, delegate) }
            for observer in observers { body(self, observer) }
        }
    }

    /// On the loop, as the link's end is reported, before `didDisconnectPeripheral` (or the
    /// manager's state change) is queued: every call still waiting gets `error` (on the delegate
    /// queue, unless its outcome got there first).
    func failPendingCalls(with error: any Error) {
        let waiting = synchronized { pendingCalls }
        guard !waiting.isEmpty else { return }
        callbacks.async { [self] in
            let (failed, delegate, observers) = synchronized { () -> ([PendingCall], CBPeripheralDelegate?, [CBPeripheralDelegate]) in
                (waiting.filter { take($0) }, delegateStorage, taps.observers)
            }
            for call in failed {
                if let delegate { call.fail(self, delegate, error) }
                for observer in observers { call.fail(self, observer, error) }
            }
        }
    }

    /// How many calls expecting a callback this peripheral ever accepted (tests: whether a call
    /// was accepted, even when its callback has come and gone by the time the caller looks).
    package var acceptedCallCount: Int { synchronized { acceptedCallsStorage } }

    /// Reports a procedure's outcome through `call`'s delegate callback: on success `apply`
    /// runs first (on the loop: discovery results go onto the objects), then `callback` with
    /// no error; on failure `callback` with Apple's error (``fail(_:_:_:)``).
    private func report<T>(_ call: PendingCall, _ result: Result<T, GATTClientError>, apply: (T) -> Void = { _ in },
                           _ callback: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate, (any Error)?) -> Void) {
        switch result {
        case .success(let value):
            apply(value)
            deliver(call) { peripheral, delegate in callback(peripheral, delegate, nil) }
        case .failure(let failure):
            fail(call, failure) { peripheral, delegate, error in callback(peripheral, delegate, error) }
        }
    }

    /// A procedure's failure, to `call`'s callback: Apple's error; nothing for the link's loss,
    /// whose error the call gets as the disconnection is reported (``failPendingCalls(with:)``).
    private func fail(_ call: PendingCall, _ failure: GATTClientError,
                      _ callback: @escaping @Sendable (CBPeripheral, CBPeripheralDelegate, any Error) -> Void) {
        guard let error = StackErrors.error(failure) else { return }
        deliver(call) { peripheral, delegate in callback(peripheral, delegate, error) }
    }

    // MARK: - Services

    /// Discovers the services with these UUIDs (all when nil or empty):
    /// `peripheral(_:didDiscoverServices:)`.
    open func discoverServices(_ serviceUUIDs: [CBUUID]?) {
        guard requireConnected("discoverServices(_:)") else { return }
        let wanted = serviceUUIDs.flatMap { $0.isEmpty ? nil : $0.map(\.bluetoothUUID) }
        guard let call = begin({ peripheral, delegate, error in delegate.peripheral(peripheral, didDiscoverServices: error) }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            let finish: @Sendable (Result<[DiscoveredService], GATTClientError>) -> Void = { [weakSelf] result in
                weakSelf.object?.report(call, result, apply: { weakSelf.object?.mergeServices($0, requested: wanted) }) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didDiscoverServices: error)
                }
            }
            guard let wanted else { return link.discoverPrimaryServices(uuid: nil, completion: finish) }
            // Discover Primary Service by Service UUID, once per UUID, gathered into one answer.
            let gathered = Gathered<DiscoveredService>(count: wanted.count)
            for uuid in wanted {
                link.discoverPrimaryServices(uuid: uuid) { result in
                    if let all = gathered.add(result) { finish(all) }
                }
            }
        }
    }

    private func mergeServices(_ found: [DiscoveredService], requested: [BluetoothUUID]?) {
        synchronized {
            let previous = servicesStorage ?? []
            var merged: [CBService] = []
            if let requested {
                // Services of other types discovered earlier stay.
                merged = previous.filter { !requested.contains($0.uuid.bluetoothUUID) }
            }
            for service in found {
                let range = service.handles.lowerBound.rawValue ... service.handles.upperBound.rawValue
                if let existing = previous.first(where: { $0.uuid.bluetoothUUID == service.uuid && $0.handleRange?.lowerBound == range.lowerBound }) {
                    existing.handleRange = range
                    merged.append(existing)
                } else {
                    merged.append(CBService(uuid: CBUUID(bluetoothUUID: service.uuid), isPrimary: true, peripheral: self, handles: range))
                }
            }
            servicesStorage = merged.sorted { ($0.handleRange?.lowerBound ?? 0) < ($1.handleRange?.lowerBound ?? 0) }
        }
    }

    /// UUIDs of the services known on the peripheral (discovered or advertised). Under the lock.
    var knownServiceUUIDs: Set<BluetoothUUID> {
        advertisedServiceUUIDs.union((servicesStorage ?? []).map(\.uuid.bluetoothUUID))
    }

    private static func discovered(_ service: CBService) -> DiscoveredService? {
        guard let range = service.synchronized({ service.handleRange }) else { return nil }
        return DiscoveredService(uuid: service.uuid.bluetoothUUID, handles: ATTHandle(range.lowerBound) ... ATTHandle(range.upperBound),
                                 isPrimary: service.isPrimary)
    }

    /// Discovers services included by `service` (among these UUIDs, all when nil).
    open func discoverIncludedServices(_ includedServiceUUIDs: [CBUUID]?, for service: CBService) {
        guard requireConnected("discoverIncludedServices(_:for:)"), requireOwn(service, "discoverIncludedServices(_:for:)"),
              let target = Self.discovered(service) else { return }
        let wanted = includedServiceUUIDs.flatMap { $0.isEmpty ? nil : Set($0.map(\.bluetoothUUID)) }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.discoverIncludedServices(of: target) { result in
                weakSelf.object?.report(call, result, apply: { found in
                    weakSelf.object?.mergeIncluded(found.filter { wanted?.contains($0.uuid) ?? true }, into: service, requested: wanted)
                }) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didDiscoverIncludedServicesFor: service, error: error)
                }
            }
        }
    }

    private func mergeIncluded(_ found: [DiscoveredIncludedService], into service: CBService, requested: Set<BluetoothUUID>?) {
        synchronized {
            let previous = service.includedServicesStorage ?? []
            var merged = requested.map { wanted in previous.filter { !wanted.contains($0.uuid.bluetoothUUID) } } ?? []
            for included in found {
                let range = included.handles.lowerBound.rawValue ... included.handles.upperBound.rawValue
                // The same service object as in `services` when it was discovered there too.
                let known = previous + (servicesStorage ?? [])
                if let existing = known.first(where: { $0.uuid.bluetoothUUID == included.uuid && $0.handleRange?.lowerBound == range.lowerBound }) {
                    merged.append(existing)
                } else {
                    merged.append(CBService(uuid: CBUUID(bluetoothUUID: included.uuid), isPrimary: false, peripheral: self, handles: range))
                }
            }
            service.includedServicesStorage = merged
        }
    }

    // MARK: - Characteristics

    /// Discovers characteristics of `service` (among these UUIDs, all when nil):
    /// `peripheral(_:didDiscoverCharacteristicsFor:error:)`.
    open func discoverCharacteristics(_ characteristicUUIDs: [CBUUID]?, for service: CBService) {
        guard requireConnected("discoverCharacteristics(_:for:)"), requireOwn(service, "discoverCharacteristics(_:for:)"),
              let target = Self.discovered(service) else { return }
        let wanted = characteristicUUIDs.flatMap { $0.isEmpty ? nil : Set($0.map(\.bluetoothUUID)) }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.discoverCharacteristics(of: target) { result in
                weakSelf.object?.report(call, result, apply: { found in
                    weakSelf.object?.mergeCharacteristics(found.filter { wanted?.contains($0.uuid) ?? true }, into: service, requested: wanted)
                }) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didDiscoverCharacteristicsFor: service, error: error)
                }
            }
        }
    }

    private func mergeCharacteristics(_ found: [DiscoveredCharacteristic], into service: CBService, requested: Set<BluetoothUUID>?) {
        synchronized {
            let previous = service.characteristicsStorage ?? []
            var merged = requested.map { wanted in previous.filter { !wanted.contains($0.uuid.bluetoothUUID) } } ?? []
            for characteristic in found {
                let properties = CBCharacteristicProperties(rawValue: UInt(characteristic.properties.rawValue))
                let object: CBCharacteristic
                if let existing = previous.first(where: { $0.valueHandle == characteristic.valueHandle.rawValue && $0.uuid.bluetoothUUID == characteristic.uuid }) {
                    object = existing
                    object.propertiesStorage = properties
                } else {
                    object = CBCharacteristic(uuid: CBUUID(bluetoothUUID: characteristic.uuid), properties: properties,
                                              value: nil, service: service)
                }
                object.declarationHandle = characteristic.declarationHandle.rawValue
                object.valueHandle = characteristic.valueHandle.rawValue
                object.endHandle = characteristic.endHandle.rawValue
                merged.append(object)
            }
            service.characteristicsStorage = merged.sorted { $0.valueHandle < $1.valueHandle }
        }
    }

    private func requireOwn(_ characteristic: CBCharacteristic, _ call: String) -> DiscoveredCharacteristic? {
        guard requireOwn(characteristic.service, call) else { return nil }
        let uuid = characteristic.uuid.bluetoothUUID  // `open`: not under the lock
        return synchronized {
            DiscoveredCharacteristic(uuid: uuid, declarationHandle: ATTHandle(characteristic.declarationHandle),
                                     valueHandle: ATTHandle(characteristic.valueHandle),
                                     properties: GATTCharacteristicProperties(rawValue: UInt8(truncatingIfNeeded: characteristic.propertiesStorage.rawValue)),
                                     endHandle: ATTHandle(characteristic.endHandle))
        }
    }

    /// Reads the value (long values entirely): `peripheral(_:didUpdateValueFor:error:)`.
    open func readValue(for characteristic: CBCharacteristic) {
        guard requireConnected("readValue(for:)"), let target = requireOwn(characteristic, "readValue(for:)") else { return }
        guard characteristic.properties.contains(.read) else {
            let error = CBATTError(.readNotPermitted, description: "Reading is not permitted.")
            return deliver { peripheral, delegate in delegate.peripheral(peripheral, didUpdateValueFor: characteristic, error: error) }
        }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didUpdateValueFor: characteristic, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.readValue(of: target.valueHandle) { result in
                weakSelf.object?.deliverValue(result, for: characteristic, call: call)
            }
        }
    }

    /// A value read (`call`) or notified (no call).
    private func deliverValue(_ result: Result<[UInt8], GATTClientError>, for characteristic: CBCharacteristic,
                              call: PendingCall? = nil) {
        switch result {
        case .success(let bytes) where call != nil:
            let value = Data(bytes)
            let update: @Sendable () -> Void = { characteristic.valueStorage = value }
            deliver(call!, update: update) { peripheral, delegate in
                delegate.peripheral(peripheral, didUpdateValueFor: characteristic, error: nil)
            }
        case .success(let bytes):
            // No closure per value (what `deliver(update:_:)` makes, with two inner ones).
            callbacks.asyncValue(bytes, for: characteristic, of: self)
        case .failure(let error):
            guard let call else { return }
            fail(call, error) { peripheral, delegate, error in delegate.peripheral(peripheral, didUpdateValueFor: characteristic, error: error) }
        }
    }

    /// On the delegate queue: a value the peripheral notified or indicated (no call of the
    /// app's asked for it) becomes the characteristic's, and the delegate hears of it.
    func deliverUpdatedValue(_ value: consuming [UInt8], for characteristic: CBCharacteristic) {
        let (delegate, observers) = synchronized { () -> (CBPeripheralDelegate?, [CBPeripheralDelegate]) in
            characteristic.takeNotifiedValue(value)
            return (delegateStorage, taps.observers)
        }
        // The bytes go here, outside the lock.
        _ = consume value
        delegate?.peripheral(self, didUpdateValueFor: characteristic, error: nil)
        for observer in observers { observer.peripheral(self, didUpdateValueFor: characteristic, error: nil) }
    }

    /// The longest value one write of `type` can carry: ATT_MTU − 3 without response (from the
    /// negotiated MTU), 512 with response (longer values go as a long write).
    open func maximumWriteValueLength(for type: CBCharacteristicWriteType) -> Int {
        switch type {
        case .withoutResponse: synchronized { ATTMTU.maximumWriteValueLength(mtu: mtuStorage) }
        default: Self.maximumLongWriteLength
        }
    }

    /// Writes the value: `.withResponse` answers with `peripheral(_:didWriteValueFor:error:)`
    /// (values longer than ATT_MTU − 3 go as a long write); `.withoutResponse` is silent and
    /// paced by `canSendWriteWithoutResponse`.
    open func writeValue(_ data: Data, for characteristic: CBCharacteristic, type: CBCharacteristicWriteType) {
        guard requireConnected("writeValue(_:for:type:)"), let target = requireOwn(characteristic, "writeValue(_:for:type:)") else { return }
        let bytes = data.byteArray
        if type == .withoutResponse {
            guard characteristic.properties.contains(.writeWithoutResponse) else {
                APIMisuse.report("writeValue(_:for:type:) without response to characteristic \(characteristic.uuid.uuidString), which does not allow it")
                return
            }
            let accepted = synchronized { () -> Bool in
                guard writeBudget > -Self.writeOverdraftLimit else { return false }
                writeBudget -= 1
                if writeBudget <= 0 { owesWriteReadiness = true }
                return true
            }
            guard accepted else {
                APIMisuse.report("writes without response made while canSendWriteWithoutResponse is false are being dropped")
                return
            }
            onLink { link, _ in link.enqueueWrite(bytes, to: target.valueHandle) }
            return
        }
        guard characteristic.properties.contains(.write) else {
            let error = CBATTError(.writeNotPermitted, description: "Writing is not permitted.")
            return deliver { peripheral, delegate in delegate.peripheral(peripheral, didWriteValueFor: characteristic, error: error) }
        }
        guard bytes.count <= Self.maximumLongWriteLength else {
            let error = CBATTError(.invalidAttributeValueLength, description: "The value's length is invalid.")
            return deliver { peripheral, delegate in delegate.peripheral(peripheral, didWriteValueFor: characteristic, error: error) }
        }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.writeValue(bytes, to: target.valueHandle) { result in
                weakSelf.object?.report(call, result) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didWriteValueFor: characteristic, error: error)
                }
            }
        }
    }

    /// Turns notifications (or indications, when the characteristic only indicates) on or off:
    /// `peripheral(_:didUpdateNotificationStateFor:error:)`, then each value through
    /// `peripheral(_:didUpdateValueFor:error:)`.
    open func setNotifyValue(_ enabled: Bool, for characteristic: CBCharacteristic) {
        guard requireConnected("setNotifyValue(_:for:)"), let target = requireOwn(characteristic, "setNotifyValue(_:for:)") else { return }
        guard !characteristic.properties.isDisjoint(with: [.notify, .indicate]) else {
            let error = CBATTError(.requestNotSupported, description: "The request is not supported.")
            return deliver { peripheral, delegate in
                delegate.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
            }
        }
        let cccd = synchronized {
            characteristic.descriptorsStorage?.first { $0.uuid.bluetoothUUID == .clientCharacteristicConfiguration }.map { ATTHandle($0.handle) }
        }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            let finish: @Sendable (Result<Void, GATTClientError>) -> Void = { [weakSelf] result in
                guard let self = weakSelf.object else { return }
                switch result {
                case .success:
                    self.deliver(call, update: { characteristic.isNotifyingStorage = enabled }) { peripheral, delegate in
                        delegate.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: nil)
                    }
                case .failure(let failure):
                    self.fail(call, failure) { peripheral, delegate, error in
                        delegate.peripheral(peripheral, didUpdateNotificationStateFor: characteristic, error: error)
                    }
                }
            }
            if enabled {
                link.subscribe(to: target, clientConfiguration: cccd, onValue: { [weakSelf] bytes in
                    weakSelf.object?.deliverValue(.success(bytes), for: characteristic)
                }, completion: finish)
            } else {
                link.unsubscribe(from: target, clientConfiguration: cccd, completion: finish)
            }
        }
    }

    // MARK: - Descriptors

    /// Discovers the descriptors of `characteristic`: `peripheral(_:didDiscoverDescriptorsFor:error:)`.
    open func discoverDescriptors(for characteristic: CBCharacteristic) {
        guard requireConnected("discoverDescriptors(for:)"), let target = requireOwn(characteristic, "discoverDescriptors(for:)") else { return }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.discoverDescriptors(of: target) { result in
                weakSelf.object?.report(call, result, apply: { weakSelf.object?.mergeDescriptors($0, into: characteristic) }) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didDiscoverDescriptorsFor: characteristic, error: error)
                }
            }
        }
    }

    private func mergeDescriptors(_ found: [DiscoveredDescriptor], into characteristic: CBCharacteristic) {
        synchronized {
            let previous = characteristic.descriptorsStorage ?? []
            characteristic.descriptorsStorage = found.map { descriptor in
                if let existing = previous.first(where: { $0.handle == descriptor.handle.rawValue && $0.uuid.bluetoothUUID == descriptor.uuid }) {
                    return existing
                }
                let object = CBDescriptor(uuid: CBUUID(bluetoothUUID: descriptor.uuid), value: nil, characteristic: characteristic)
                object.handle = descriptor.handle.rawValue
                return object
            }
        }
    }

    private func requireOwn(_ descriptor: CBDescriptor, _ call: String) -> ATTHandle? {
        guard requireOwn(descriptor.characteristic?.service, call) else { return nil }
        return ATTHandle(synchronized { descriptor.handle })
    }

    /// Reads a descriptor: `peripheral(_:didUpdateValueFor:error:)` (descriptor form). The value
    /// has Apple's type for the descriptor (see ``CBDescriptor/value``).
    open func readValue(for descriptor: CBDescriptor) {
        guard requireConnected("readValue(for:)"), let handle = requireOwn(descriptor, "readValue(for:)") else { return }
        guard let call = begin({ peripheral, delegate, error in delegate.peripheral(peripheral, didUpdateValueFor: descriptor, error: error) })
        else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.readValue(of: handle) { result in
                guard let self = weakSelf.object else { return }
                switch result {
                case .success(let bytes):
                    let value = Unchecked(CBDescriptor.typedValue(bytes, uuid: descriptor.uuid.bluetoothUUID))
                    self.deliver(call, update: { descriptor.valueStorage = value.value }) { peripheral, delegate in
                        delegate.peripheral(peripheral, didUpdateValueFor: descriptor, error: nil)
                    }
                case .failure(let failure):
                    self.fail(call, failure) { peripheral, delegate, error in
                        delegate.peripheral(peripheral, didUpdateValueFor: descriptor, error: error)
                    }
                }
            }
        }
    }

    /// Writes a descriptor (never the Client Characteristic Configuration: use
    /// `setNotifyValue(_:for:)`): `peripheral(_:didWriteValueFor:error:)` (descriptor form).
    open func writeValue(_ data: Data, for descriptor: CBDescriptor) {
        guard requireConnected("writeValue(_:for:)"), let handle = requireOwn(descriptor, "writeValue(_:for:)") else { return }
        guard descriptor.uuid.bluetoothUUID != .clientCharacteristicConfiguration else {
            APIMisuse.report("Client Characteristic Configuration descriptors must be configured using setNotifyValue(_:for:)")
            return
        }
        let bytes = data.byteArray
        guard let call = begin({ peripheral, delegate, error in delegate.peripheral(peripheral, didWriteValueFor: descriptor, error: error) })
        else { return }
        onLink { [weakSelf = WeakHandle(self)] link, _ in
            link.writeValue(bytes, to: handle) { result in
                weakSelf.object?.report(call, result) { peripheral, delegate, error in
                    delegate.peripheral(peripheral, didWriteValueFor: descriptor, error: error)
                }
            }
        }
    }

    // MARK: - RSSI and L2CAP

    /// Reads the RSSI of the connection: `peripheral(_:didReadRSSI:error:)`.
    open func readRSSI() {
        guard requireConnected("readRSSI()") else { return }
        guard let call = begin({ peripheral, delegate, error in
            delegate.peripheral(peripheral, didReadRSSI: NSNumber(value: 127), error: error)
        }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, service in
            service.readRSSI(of: link.peer) { result in
                guard let self = weakSelf.object else { return }
                switch result {
                case .success(let rssi):
                    let number = NSNumber(value: Int(rssi))
                    self.deliver(call, update: { self.rssiStorage = number }) { peripheral, delegate in
                        delegate.peripheral(peripheral, didReadRSSI: number, error: nil)
                    }
                case .failure(let failure):
                    let error = if case .notSupported = failure {
                        CBError(.unknown, description: "The controller could not measure the RSSI.")
                    } else {
                        CBError(.unknown, description: "Reading the RSSI failed: \(failure).")
                    }
                    self.deliver(call) { peripheral, delegate in
                        delegate.peripheral(peripheral, didReadRSSI: NSNumber(value: 127), error: error)
                    }
                }
            }
        }
    }

    /// Opens an L2CAP credit-based channel to the peripheral's `PSM`:
    /// `peripheral(_:didOpen:error:)` follows with the channel (keep a strong reference to it,
    /// and open or schedule its streams) or the error. If the peripheral asks for a more secure
    /// link, the central pairs (or encrypts with the bond's key) and tries again, as iOS does.
    open func openL2CAPChannel(_ PSM: CBL2CAPPSM) {
        guard requireConnected("openL2CAPChannel(_:)") else { return }
        // Role events come on the device's loop: the channel's bridge works there.
        guard let loop = manager?.roleLoop else { return }
        guard let call = begin({ peripheral, delegate, error in delegate.peripheral(peripheral, didOpen: nil, error: error) }) else { return }
        onLink { [weakSelf = WeakHandle(self)] link, service in
            service.openChannel(to: link.peer, psm: PSM) { result in
                guard let self = weakSelf.object else {
                    if case .success(let channel) = result { channel.close() }
                    return
                }
                switch result {
                case .success(let roleChannel):
                    let channel = ChannelBridge.makeChannel(roleChannel, peer: self, loop: loop)
                    // A channel opened on a link whose end answered the call first is released
                    // with the block, which closes it.
                    self.deliver(call) { peripheral, delegate in delegate.peripheral(peripheral, didOpen: channel, error: nil) }
                case .failure(.disconnected), .failure(.security(.disconnected)):
                    // The disconnection's error comes as it is reported (failPendingCalls).
                    break
                case .failure(let failure):
                    let error = CBL2CAPChannel.openError(failure)
                    self.deliver(call) { peripheral, delegate in delegate.peripheral(peripheral, didOpen: nil, error: error) }
                }
            }
        }
    }

    // MARK: - From the link (on the loop, through `linkEvents`)

    func linkMTUChanged(_ mtu: Int) {
        synchronized { mtuStorage = mtu }
    }

    /// The GAP Device Name was read. It replaces `name` on the delegate queue, in order with
    /// the callbacks before it (a `didConnect` still queued shows the name it was made with).
    func linkReadName(_ name: String) {
        manager?.callbacks.async { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            let changed = self.synchronized { () -> Bool in
                self.hasGAPName = true
                guard self.nameStorage != name else { return false }
                self.nameStorage = name
                return true
            }
            guard changed else { return }
            self.delegate?.peripheralDidUpdateName(self)
            for observer in self.synchronized({ self.taps.observers }) { observer.peripheralDidUpdateName(self) }
        }
    }

    /// An advertisement seen while scanning (called with the manager's lock held).
    func advertisementSeen(name: String?, services: Set<BluetoothUUID>) {
        // The same set as last time (shared storage) compares at once: no hashing per report.
        if !services.isEmpty, advertisedServiceUUIDs != services {
            // The advertisement's own set when it holds all of ours: shared storage, so that the
            // next report's comparison is immediate (a peripheral the manager keeps sees the same
            // advertisement over and over).
            if advertisedServiceUUIDs.isSubset(of: services) {
                advertisedServiceUUIDs = services
            } else {
                advertisedServiceUUIDs.formUnion(services)
            }
        }
        guard let name, !hasGAPName, nameStorage != name else { return }
        let hadName = nameStorage != nil
        nameStorage = name
        if hadName { deliver { peripheral, delegate in delegate.peripheralDidUpdateName(peripheral) } }
    }

    /// Service Changed: what was discovered in `range` is gone; the app rediscovers.
    func linkServicesChanged(_ range: ClosedRange<ATTHandle>) {
        let invalidated = synchronized { () -> [CBService] in
            let all = servicesStorage ?? []
            let stale = all.filter { service in
                guard let handles = service.handleRange else { return false }
                return handles.lowerBound <= range.upperBound.rawValue && range.lowerBound.rawValue <= handles.upperBound
            }
            if servicesStorage != nil { servicesStorage = all.filter { service in !stale.contains { $0 === service } } }
            return stale
        }
        deliver { peripheral, delegate in delegate.peripheral(peripheral, didModifyServices: invalidated) }
    }

    func linkReturnedWriteBudget(_ count: Int) {
        let ready = synchronized { () -> Bool in
            writeBudget += count
            guard owesWriteReadiness, writeBudget > 0 else { return false }
            owesWriteReadiness = false
            return true
        }
        if ready { deliver { peripheral, delegate in delegate.peripheralIsReady(toSendWriteWithoutResponse: peripheral) } }
    }

    /// The connection is gone: nothing is notifying and writes start afresh.
    func linkClosed() {
        synchronized {
            linkStateStorage = .disconnected
            writeBudget = Self.writeBudgetLimit
            owesWriteReadiness = false
            for service in servicesStorage ?? [] {
                for characteristic in service.characteristicsStorage ?? [] { characteristic.isNotifyingStorage = false }
            }
        }
    }
}

// MARK: - Restoration

extension CBPeripheral {
    /// On the loop: the peripheral as a daemon kept it for a restored manager (connected or
    /// connecting, with what was discovered and which characteristics notify). Returns the
    /// notifying characteristics by value handle.
    func restore(_ restored: DaemonRestoredPeer) -> [(ATTHandle, CBCharacteristic)] {
        synchronized {
            linkStateStorage = restored.isConnected ? .connected : .connecting
            if restored.isConnected { mtuStorage = Int(restored.mtu) }
        }
        guard let services = restored.services else { return [] }
        mergeServices(services.map(\.service), requested: nil)
        var notifying: [(ATTHandle, CBCharacteristic)] = []
        for service in services {
            guard let characteristics = service.characteristics,
                  let object = synchronized({ servicesStorage?.first { $0.handleRange?.lowerBound == service.service.handles.lowerBound.rawValue } })
            else { continue }
            mergeCharacteristics(characteristics.map(\.characteristic), into: object, requested: nil)
            for characteristic in characteristics {
                guard let made = synchronized({ object.characteristicsStorage?.first { $0.valueHandle == characteristic.characteristic.valueHandle.rawValue } })
                else { continue }
                if let descriptors = characteristic.descriptors { mergeDescriptors(descriptors, into: made) }
                synchronized { made.isNotifyingStorage = characteristic.isNotifying }
                if characteristic.isNotifying { notifying.append((characteristic.characteristic.valueHandle, made)) }
            }
        }
        return notifying
    }

    /// A value of a restored subscription.
    func linkDelivered(_ value: [UInt8], for characteristic: CBCharacteristic) { deliverValue(.success(value), for: characteristic) }
}

/// Results of several procedures that make one answer: the first failure, or all items.
final class Gathered<Item>: @unchecked Sendable {
    private var remaining: Int
    private var items: [Item] = []
    private var failure: GATTClientError?

    init(count: Int) { remaining = count }

    /// Adds one procedure's result; returns the whole answer after the last one.
    func add(_ result: Result<[Item], GATTClientError>) -> Result<[Item], GATTClientError>? {
        switch result {
        case .success(let found): items += found
        case .failure(let error): if failure == nil { failure = error }
        }
        remaining -= 1
        guard remaining == 0 else { return nil }
        return failure.map { .failure($0) } ?? .success(items)
    }
}

// MARK: - Linux extensions

/// **Linux extension.** A physical layer of LE (Vol 6 Part A §3).
public enum CBLinuxPHY: Sendable, Hashable {
    /// 1 Msym/s, every controller's.
    case le1M
    /// 2 Msym/s: twice the data rate.
    case le2M
    /// Coded (S=8): four times the range, an eighth of the rate.
    case leCoded
}

extension CBPeripheral {
    /// **Linux extension.** Asks the link layer to move the connection to `phy` in both
    /// directions (LE Set PHY), as iOS does by itself for 2M. Fire and forget: the peripheral's
    /// controller may refuse, and the link then stays where it is. Through `corebluetoothd`, a
    /// daemon of protocol version 3 or later.
    public func linuxSetPHY(_ phy: CBLinuxPHY) {
        guard requireConnected("linuxSetPHY(_:)") else { return }
        let wanted: LEPHY = switch phy {
        case .le1M: .le1M
        case .le2M: .le2M
        case .leCoded: .leCoded
        }
        onLink { link, service in service.setPHY(of: link.peer, wanted) }
    }

    /// **Linux extension.** Asks for a connection interval of `interval` seconds (7.5 ms to
    /// 4 s, rounded to the link layer's 1.25 ms steps), no peripheral latency, a supervision
    /// timeout of 5 s (or just over two intervals, if longer): what a simulated fleet or a throughput test needs, below the 15 ms floor of
    /// ``CBPeripheralManager/setDesiredConnectionLatency(_:for:)``. Fire and forget: the
    /// controller or the peer may refuse, and the link then keeps its interval. Through
    /// `corebluetoothd`, a daemon of protocol version 3 or later.
    public func linuxSetConnectionInterval(_ interval: TimeInterval) {
        guard requireConnected("linuxSetConnectionInterval(_:)") else { return }
        guard interval.isFinite, (0.0075...4.0).contains(interval) else {
            APIMisuse.report("linuxSetConnectionInterval(_:) with \(interval) s, outside 7.5 ms–4 s")
            return
        }
        let units = UInt16((interval / 0.00125).rounded())
        // The supervision timeout must exceed two intervals.
        let timeout = max(0x01F4, units / 4 + 1)
        let parameters = ConnectionParameters(intervalMin: units, intervalMax: units, latency: 0, timeout: timeout)
        onLink { link, service in service.updateParameters(of: link.peer, parameters) }
    }
}
