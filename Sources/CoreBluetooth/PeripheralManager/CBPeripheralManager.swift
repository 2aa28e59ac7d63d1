import ATT
import AssignedNumbers
import Dispatch
import Foundation
import HostDevice
import HostStack
import RemoteRoles
import RoleServices
import SMP
import Scheduling

/// The local device as a peripheral: publishes a GATT database, advertises, answers centrals.
open class CBPeripheralManager: CBManager, @unchecked Sendable {
    // @unchecked: the delegate, advertising flag and taps are guarded by `objectLock` (the
    // manager's, shared by its centrals and requests: ``ObjectLock``).
    /// Weakly (`WeakHeldExistential`: a weak reference gives the app's object a side table, and
    /// each retain and release of it per callback the runtime's slow path).
    @exclusivity(unchecked) private var delegateHeld = WeakHeldExistential<any CBPeripheralManagerDelegate>(wrappedValue: nil)  // under objectLock
    private var delegateStorage: CBPeripheralManagerDelegate? {
        get { delegateHeld.wrappedValue }
        set { delegateHeld.wrappedValue = newValue }
    }
    private var isAdvertisingStorage = false
    /// The peripheral role on the device's loop (a client of the device while it is on:
    /// services, advertising, connections, requests, updates), and what turns its events
    /// (values) into objects and delegate calls.
    private let service = PeripheralService()
    private let events = PeripheralEvents()
    /// The peripheral role on `corebluetoothd` instead, when the manager's transport names it:
    /// set once in init, before the manager is shared.
    private var remoteRole: RemotePeripheralRole?
    /// `CBPeripheralManagerOptionRestoreIdentifierKey`: on a daemon, what the daemon keeps for
    /// this manager when the process goes (services, advertising, subscribers), and gives back
    /// to the next manager with it.
    private let restoreIdentifier: String?
    /// What the API calls: the role-service boundary (the in-process service, whose life on
    /// the device stays with `service`, or the daemon's).
    private var role: any PeripheralRole { remoteRole ?? service }
    /// Observers hearing the delegate's events too (CoreBluetoothAsync's tap).
    private var taps = EventTaps<CBPeripheralManagerDelegate>()

    /// Who hears about state, requests and subscriptions (held weakly).
    open weak var delegate: CBPeripheralManagerDelegate? {
        get { synchronized { delegateStorage } }
        set { synchronized { delegateStorage = newValue } }
    }

    /// A peripheral manager with no delegate, calling back on the main queue.
    public convenience init() {
        self.init(delegate: nil, queue: nil, options: nil)
    }

    /// A peripheral manager calling `delegate` on `queue` (the main queue when nil).
    public convenience init(delegate: CBPeripheralManagerDelegate?, queue: DispatchQueue?) {
        self.init(delegate: delegate, queue: queue, options: nil)
    }

    /// A peripheral manager calling `delegate` on `queue` (the main queue when nil), with init
    /// options (`CBPeripheralManagerOption…Key`, and the Linux extensions `CBManagerOptionLinux…Key`).
    public init(delegate: CBPeripheralManagerDelegate?, queue: DispatchQueue?, options: [String: Any]? = nil) {
        restoreIdentifier = options?[CBPeripheralManagerOptionRestoreIdentifierKey] as? String
        super.init(queue: queue, options: options)
        delegateStorage = delegate
        events.manager = self
        service.events = events
        if let remote {
            let role = RemotePeripheralRole(host: remote)
            role.events = events
            remoteRole = role
        }
        startDevice()
    }

    deinit {
        // The daemon ends the session: its services leave the database, its advertising stops.
        if let remoteRole, let remote { remote.loop.execute { remoteRole.close() } }
    }

    override func startRemote(_ remote: DaemonSessionHost) {
        guard let remoteRole else { return }
        let events = self.events
        let identifier = restoreIdentifier
        remote.loop.execute { [weakSelf = WeakHandle(self)] in
            remoteRole.open(restoreIdentifier: identifier, onRestore: { restored in
                // Before the first state, as on iOS.
                guard let self = weakSelf.object else { return }
                let state = Unchecked(events.restore(restored))
                self.deliver { manager, delegate in delegate.peripheralManager(manager, willRestoreState: state.value) }
            }, onState: { state, reason in
                guard let self = weakSelf.object else { return }
                // What the device's stop does in the process (the daemon dropped the
                // session's services, advertising and centrals).
                if state != CBManagerState.poweredOn.rawValue { events.deviceDidStop() }
                self.deliverRemoteState(Int(state), reason: reason)
            })
        }
    }

    override func stateDidChange() {
        delegate?.peripheralManagerDidUpdateState(self)
        for observer in synchronized({ taps.observers }) { observer.peripheralManagerDidUpdateState(self) }
    }

    /// Makes `observer` hear every delegate event of this manager, on its queue right after the
    /// delegate, until ``removeEventTap(_:)``: CoreBluetoothAsync's way in, which leaves the
    /// app's delegate alone.
    package func addEventTap(_ observer: CBPeripheralManagerDelegate) -> CBEventTapToken {
        synchronized { taps.add(observer) }
    }

    package func removeEventTap(_ token: CBEventTapToken) {
        _ = synchronized { taps.remove(token) }  // released after the lock (EventTaps.remove)
    }

    override var deviceClient: (any HostDeviceClient)? { service }

    override func installPairingAgent(_ agent: (any PairingAgent)?) { role.pairingAgent = agent }

    override func deviceDidStart(_ hostDevice: HostDevice) {
        service.deviceDidStart(hostDevice)
    }

    override func deviceDidStop() {
        service.deviceDidStop()
        events.deviceDidStop()
    }

    /// Runs `body` on the device's loop with the peripheral role service and the API side's
    /// events, if the device is on.
    private func onService(_ body: @escaping @Sendable (any PeripheralRole, PeripheralEvents) -> Void) {
        guard let loop = roleLoop else { return }
        let (role, events) = (self.role, self.events)
        loop.execute { if role.isOn { body(role, events) } }
    }

    /// On the delegate queue (nothing if the manager is gone): runs `update`, then calls the
    /// delegate and the tap's observers with `body`.
    func deliver(updating update: (@Sendable () -> Void)? = nil,
                 _ body: @escaping @Sendable (CBPeripheralManager, CBPeripheralManagerDelegate) -> Void) {
        callbacks.async { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            update?()
            if let delegate = self.delegate { body(self, delegate) }
            for observer in self.synchronized({ self.taps.observers }) { body(self, observer) }
        }
    }

    /// Sharing data while in the background: ``CBManager/authorization`` in the old type (the
    /// raw values are the same), as iOS 13 answers.
    @available(*, deprecated, message: "Use CBManager.authorization instead")
    open class func authorizationStatus() -> CBPeripheralManagerAuthorizationStatus {
        CBPeripheralManagerAuthorizationStatus(rawValue: CBManager.authorization.rawValue) ?? .authorized
    }

    /// Whether advertising is on: true from the successful start until `stopAdvertising()` or
    /// power off. It stays true while centrals are connected (advertising goes on then).
    open var isAdvertising: Bool { synchronized { isAdvertisingStorage } }

    func setAdvertisingFlag(_ on: Bool) {
        synchronized { isAdvertisingStorage = on }
    }

    /// Advertises `CBAdvertisementDataLocalNameKey` (`String`) and
    /// `CBAdvertisementDataServiceUUIDsKey` (`[CBUUID]`), and no other of Apple's keys, as
    /// connectable and scannable legacy advertising every 100 ms:
    /// `peripheralManagerDidStartAdvertising(_:error:)` follows. The name goes in the scan
    /// response when it does not fit beside the UUIDs; UUIDs that fit nowhere are not
    /// advertised (Core Bluetooth's overflow area). The advertised name also becomes the
    /// GAP Device Name centrals read.
    ///
    /// **Linux extension:** ``CBAdvertisementDataLinuxManufacturerDataKey`` (`Data`) adds
    /// manufacturer data; alone, it makes a non-connectable beacon advertisement (see the key).
    /// ``CBAdvertisementDataLinuxAdvertisingDataKey`` (and ``CBAdvertisementDataLinuxScanResponseDataKey``)
    /// advertise those bytes as they are.
    open func startAdvertising(_ advertisementData: [String: Any]?) {
        guard requirePoweredOn("startAdvertising(_:)") else { return }
        var name: String?
        var serviceUUIDs: [BluetoothUUID] = []
        var manufacturerData: [UInt8]?
        var rawAdvertising: [UInt8]?
        var rawScanResponse: [UInt8]?
        var problem: String?
        for (key, value) in advertisementData ?? [:] {
            switch key {
            case CBAdvertisementDataLocalNameKey:
                if let text = value as? String { name = text } else { problem = "the value of \(key) must be a String" }
            case CBAdvertisementDataServiceUUIDsKey:
                if let list = value as? [CBUUID] { serviceUUIDs = list.map(\.bluetoothUUID) } else {
                    problem = "the value of \(key) must be an array of CBUUID"
                }
            case CBAdvertisementDataLinuxManufacturerDataKey:
                if let data = value as? Data, data.count >= 2 { manufacturerData = data.byteArray } else {
                    problem = "the value of \(key) must be Data starting with the 2-byte company identifier"
                }
            case CBAdvertisementDataLinuxAdvertisingDataKey, CBAdvertisementDataLinuxScanResponseDataKey:
                guard let data = value as? Data, data.count <= 31 else {
                    problem = "the value of \(key) must be Data of at most 31 bytes"
                    break
                }
                if key == CBAdvertisementDataLinuxAdvertisingDataKey { rawAdvertising = data.byteArray } else { rawScanResponse = data.byteArray }
            default:
                problem = "\(key) cannot be advertised; only CBAdvertisementDataLocalNameKey and CBAdvertisementDataServiceUUIDsKey can"
                    + " (and, as Linux extensions, CBAdvertisementDataLinuxManufacturerDataKey, CBAdvertisementDataLinuxAdvertisingDataKey"
                    + " and CBAdvertisementDataLinuxScanResponseDataKey)"
            }
            if problem != nil { break }
        }
        if problem == nil, rawScanResponse != nil, rawAdvertising == nil {
            problem = "CBAdvertisementDataLinuxScanResponseDataKey needs CBAdvertisementDataLinuxAdvertisingDataKey"
        }
        if let problem {
            let error = CBError(.invalidParameters, userInfo: [NSLocalizedDescriptionKey: problem])
            deliver { manager, delegate in delegate.peripheralManagerDidStartAdvertising(manager, error: error) }
            return
        }
        let (localName, uuids, manufacturer) = (name, serviceUUIDs, manufacturerData)
        let raw = rawAdvertising.map { (advertisement: $0, scanResponse: rawScanResponse ?? []) }
        onService { service, _ in
            service.startAdvertising(name: localName, serviceUUIDs: uuids, manufacturerData: manufacturer, raw: raw)
        }
    }

    /// Stops advertising.
    open func stopAdvertising() {
        guard requirePoweredOn("stopAdvertising()") else { return }
        setAdvertisingFlag(false)
        onService { service, _ in service.stopAdvertising() }
    }

    /// Asks `central` for a connection interval matching `latency`: 15–30 ms for `.low`,
    /// 30–50 ms for `.medium`, 90–150 ms for `.high` (ranges that follow Apple's accessory
    /// design guidelines, so that an iPhone or a Mac central accepts them too).
    open func setDesiredConnectionLatency(_ latency: CBPeripheralManagerConnectionLatency, for central: CBCentral) {
        guard requirePoweredOn("setDesiredConnectionLatency(_:for:)") else { return }
        let level: PeripheralConnectionLatency = switch latency {
        case .low: .low
        case .medium: .medium
        case .high: .high
        }
        onService { service, events in
            guard events.isConnected(central) else {
                APIMisuse.report("setDesiredConnectionLatency(_:for:) for a central that is not connected")
                return
            }
            service.setDesiredConnectionLatency(level, for: central.centralID)
        }
    }

    /// Publishes `service` (and its characteristics and descriptors): `peripheralManager(_:didAdd:error:)`.
    /// The service is taken as it is now; later changes of the mutable objects do not alter
    /// the published database. Included services must be published first.
    open func add(_ service: CBMutableService) {
        guard requirePoweredOn("add(_:)") else { return }
        switch ServiceBlueprint.make(service) {
        case .success(let blueprint):
            onService { service, events in events.publish(blueprint, on: service) }
        case .failure(let error):
            APIMisuse.report("add(_:) of service \(service.uuid): \(error.userInfo[NSLocalizedDescriptionKey] as? String ?? "\(error.code)")")
            deliver { manager, delegate in delegate.peripheralManager(manager, didAdd: service, error: error) }
        }
    }

    /// Removes a published service (not one another published service includes).
    open func remove(_ service: CBMutableService) {
        guard requirePoweredOn("remove(_:)") else { return }
        onService { roleService, events in events.unpublish(service, on: roleService) }
    }

    /// Removes every published service.
    open func removeAllServices() {
        guard requirePoweredOn("removeAllServices()") else { return }
        onService { service, _ in service.unpublishAll() }
    }

    /// Answers a read or write request: once per `didReceiveRead`, and once per
    /// `didReceiveWrite` (with its first request, all or nothing). For a read, `request.value`
    /// holds the bytes from `request.offset` on. Answers to Write Commands are ignored.
    open func respond(to request: CBATTRequest, withResult result: CBATTError.Code) {
        let id = request.transaction
        guard id >= 0 else { return }
        guard events.outstanding.withLock({ $0.remove(id) != nil }) else {
            APIMisuse.report("respond(to:withResult:) for a request that was already answered or is unknown (or whose central disconnected)")
            return
        }
        let error: ATTErrorCode? = result == .success ? nil : ATTErrorCode(rawValue: UInt8(truncatingIfNeeded: result.rawValue))
        let value = request.value.map { $0.byteArray }
        onService { service, _ in service.answer(id, error: error, value: value) }
    }

    /// Sends `value` to the subscribed centrals (all when `centrals` is nil), as a notification
    /// or an indication as each central asked, cut to its `maximumUpdateValueLength`. False
    /// when the transmit queue is full: `peripheralManagerIsReady(toUpdateSubscribers:)`
    /// follows once there is room. Callable from any thread; never waits for the stack.
    open func updateValue(_ value: Data, for characteristic: CBMutableCharacteristic,
                          onSubscribedCentrals centrals: [CBCentral]?) -> Bool {
        guard requirePoweredOn("updateValue(_:for:onSubscribedCentrals:)"), let loop = roleLoop else { return false }
        // Resolved here, so that only values cross to the loop (0: not published).
        let handle = ATTHandle(characteristic.synchronized { characteristic.valueHandle })
        let role = self.role
        let (accepted, needsDrain) = role.acceptUpdate(PeripheralUpdate(handle: handle, value: value,
                                                                        centrals: centrals?.map(\.centralID)))
        if needsDrain { loop.execute { role.drainInbox() } }
        return accepted
    }

    /// Publishes an L2CAP credit-based channel server on a PSM the system chooses (0x0080–0x00FF):
    /// `peripheralManager(_:didPublishL2CAPChannel:error:)` gives the PSM (centrals find it the
    /// way the app tells them, often in a `CBUUIDL2CAPPSMCharacteristicString` characteristic).
    /// Channels centrals open arrive in `peripheralManager(_:didOpen:error:)`. With
    /// `encryptionRequired`, a central on an unencrypted link is refused (Insufficient
    /// Authentication, or Insufficient Encryption when bonded) and pairs first.
    open func publishL2CAPChannel(withEncryption encryptionRequired: Bool) {
        guard requirePoweredOn("publishL2CAPChannel(withEncryption:)") else { return }
        publishChannel(psm: nil, encryptionRequired: encryptionRequired)
    }

    /// **Linux extension.** Publishes an L2CAP channel server on a PSM the program names — an
    /// SPSM a profile assigns (0x0001–0x007F) or one agreed out of band (up to 0x00FF) — instead
    /// of one the system chooses: `peripheralManager(_:didPublishL2CAPChannel:error:)` follows,
    /// with an error if the PSM is not an LE PSM or is published already.
    public func linuxPublishL2CAPChannel(_ PSM: CBL2CAPPSM, withEncryption encryptionRequired: Bool) {
        guard requirePoweredOn("linuxPublishL2CAPChannel(_:withEncryption:)") else { return }
        publishChannel(psm: PSM, encryptionRequired: encryptionRequired)
    }

    private func publishChannel(psm: CBL2CAPPSM?, encryptionRequired: Bool) {
        onService { [weakSelf = WeakHandle(self)] service, _ in
            service.publishChannel(psm: psm, requiresEncryption: encryptionRequired) { result in
                weakSelf.object?.deliver { manager, delegate in
                    switch result {
                    case .success(let psm):
                        delegate.peripheralManager(manager, didPublishL2CAPChannel: psm, error: nil)
                    case .failure(let failure):
                        let code: CBError.Code = if case .noFreePSM = failure { .outOfSpace } else { .invalidParameters }
                        let error = CBError(code, description: "No L2CAP channel could be published: \(failure).")
                        delegate.peripheralManager(manager, didPublishL2CAPChannel: psm ?? 0, error: error)
                    }
                }
            }
        }
    }

    /// Stops accepting channels to `PSM` (channels already open stay open):
    /// `peripheralManager(_:didUnpublishL2CAPChannel:error:)` follows.
    open func unpublishL2CAPChannel(_ PSM: CBL2CAPPSM) {
        guard requirePoweredOn("unpublishL2CAPChannel(_:)") else { return }
        onService { [weakSelf = WeakHandle(self)] service, _ in
            service.unpublishChannel(PSM) { removed in
                let error = removed ? nil : CBError(.invalidParameters, description: "No L2CAP channel of this manager is published on PSM \(PSM).")
                weakSelf.object?.deliver { manager, delegate in delegate.peripheralManager(manager, didUnpublishL2CAPChannel: PSM, error: error) }
            }
        }
    }
}
