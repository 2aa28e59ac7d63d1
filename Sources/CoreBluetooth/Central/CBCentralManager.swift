import ATT
import AssignedNumbers
import Bonding
import DaemonProtocol
import Dispatch
import Foundation
import HCI
import HostDevice
import HostStack
import RemoteRoles
import RoleServices
import SMP
import Scheduling

/// Options for `registerForConnectionEvents(options:)`.
public struct CBConnectionEventMatchingOption: Hashable, RawRepresentable, Sendable {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Match peripherals with these services (`[CBUUID]`).
    public static let serviceUUIDs = CBConnectionEventMatchingOption(rawValue: CBConnectionEventMatchingOptionServiceUUIDs)
    /// Match these peripherals (`[UUID]`).
    public static let peripheralUUIDs = CBConnectionEventMatchingOption(rawValue: CBConnectionEventMatchingOptionPeripheralUUIDs)
}

/// The local device as a central: scans for peripherals, connects to them.
///
/// On a virtual radio each instance is a device of its own (see ``CBVirtualRadio``); managers
/// naming the same external controller share it. Its calls are safe from any thread; the
/// delegate is called on the queue given at init (the main queue when nil).
open class CBCentralManager: CBManager, @unchecked Sendable {
    // @unchecked: the delegate, scanning flag, object table and taps are guarded by
    // `objectLock` (the manager's, shared by its peripherals: ``ObjectLock``); `remoteRole` is
    // set in init, before the manager is shared.
    /// Features a central may support.
    public struct Feature: OptionSet, Sendable {
        public var rawValue: UInt
        public init(rawValue: UInt) { self.rawValue = rawValue }
        /// Extended advertising and connections on LE Coded and 2M PHYs.
        public static let extendedScanAndConnect = Feature(rawValue: 1 << 0)
    }

    /// Weakly (`WeakHeldExistential`: a weak reference gives the app's object a side table, and
    /// each retain and release of it per callback the runtime's slow path).
    @exclusivity(unchecked) private var delegateHeld = WeakHeldExistential<any CBCentralManagerDelegate>(wrappedValue: nil)  // under objectLock
    private var delegateStorage: CBCentralManagerDelegate? {
        get { delegateHeld.wrappedValue }
        set { delegateHeld.wrappedValue = newValue }
    }
    private var isScanningStorage = false
    /// The peripheral objects the app holds, by identifier (the manager does not keep them
    /// alive, as on iOS: releasing one cancels its connection).
    /// Keyed by the identifier's bits (`IntegerKeyMap`: every report looks here, and a
    /// `Dictionary` hashes all 16 bytes with SipHash). Guarded by the manager's lock, so without
    /// the runtime's exclusivity checks.
    @exclusivity(unchecked) private var peripheralObjects = IntegerKeyMap<PeripheralKey, WeakPeripheral>()  // exclusivity checks: 0.08 % of adv
    /// Released objects' entries are dropped when the map grows past this (guarded likewise).
    @exclusivity(unchecked) private var pruneThreshold = CBCentralManager.minimumPruneThreshold  // exclusivity checks: 0.08 % of adv
    /// Entries kept before the first pruning, and at least after each: small, as a device seen
    /// for the first time walks the table (``livePeripheral(at:)``).
    private static let minimumPruneThreshold = 64
    /// Discovered peripherals that are disconnected, held by the manager itself (guarded by
    /// the object lock; not in `peripheralObjects` meanwhile): a scanning app that keeps none
    /// of the peripherals it is told about gets the same object for a device report after
    /// report (as on iOS while an object lives), instead of one made and released per report.
    /// Let go (``letGo(_:)``, back to `peripheralObjects`) as the app connects one, so that
    /// releasing a connecting or connected object still cancels its connection; a
    /// disconnected one started nothing to cancel.
    @exclusivity(unchecked) private var keptPeripherals = IntegerKeyMap<PeripheralKey, CBPeripheral>()  // exclusivity checks: as peripheralObjects
    /// The kept objects by normalized address (guarded likewise), so that a device seen for the
    /// first time finds one without a walk (``livePeripheral(at:)``). An entry whose object
    /// moved since is checked against the object and ignored.
    @exclusivity(unchecked) private var keptAddresses = IntegerKeyMap<AddressKey, PeripheralKey>()  // exclusivity checks: as peripheralObjects
    /// Discovered objects kept at most; past it the manager lets all of them go (those the app
    /// holds stay in `peripheralObjects`) and starts again: a scan among rotating private
    /// addresses sees new devices without end.
    static let keptPeripheralsLimit = 4096
    /// The central role on the device's loop (a client of the device while it is on), and
    /// what turns its events (values) into objects and delegate calls.
    private let service = CentralService()
    private let events = CentralEvents()
    /// The central role on `corebluetoothd` instead, when the manager's transport names it:
    /// set once in init, before the manager is shared.
    private var remoteRole: RemoteCentralRole?
    /// `CBCentralManagerOptionRestoreIdentifierKey`: on a daemon, what the daemon keeps for this
    /// manager when the process goes, and gives back to the next manager with it.
    private let restoreIdentifier: String?
    /// Observers hearing the delegate's events too (CoreBluetoothAsync's tap).
    private var taps = EventTaps<CBCentralManagerDelegate>()

    private struct WeakPeripheral {
        @WeakHeld var object: CBPeripheral?
    }

    /// An identifier as an `IntegerKeyMap` key: its two halves folded (identifiers are random,
    /// and equal keys are compared whole).
    private struct PeripheralKey: IntegerMapKey {
        let identifier: UUID
        var integerMapBits: UInt64 {
            withUnsafeBytes(of: identifier.uuid) { $0.loadUnaligned(as: UInt64.self) ^ $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self) }
        }
    }

    /// Who hears about state, discoveries and connections (held weakly).
    open weak var delegate: CBCentralManagerDelegate? {
        get { synchronized { delegateStorage } }
        set { synchronized { delegateStorage = newValue } }
    }

    /// A central with no delegate, calling back on the main queue.
    public convenience init() {
        self.init(delegate: nil, queue: nil, options: nil)
    }

    /// A central calling `delegate` on `queue` (the main queue when nil).
    public convenience init(delegate: CBCentralManagerDelegate?, queue: DispatchQueue?) {
        self.init(delegate: delegate, queue: queue, options: nil)
    }

    /// A central calling `delegate` on `queue` (the main queue when nil), with init options
    /// (`CBCentralManagerOption…Key`, and the Linux extensions `CBManagerOptionLinux…Key`).
    public init(delegate: CBCentralManagerDelegate?, queue: DispatchQueue?, options: [String: Any]? = nil) {
        restoreIdentifier = options?[CBCentralManagerOptionRestoreIdentifierKey] as? String
        super.init(queue: queue, options: options)
        delegateStorage = delegate
        events.manager = self
        events.connectionEvents = device?.connectionEvents
        service.events = events
        if let remote {
            let role = RemoteCentralRole(host: remote)
            role.events = events
            role.onConnectionEvent = { [weakSelf = WeakHandle(self)] peer, connected in weakSelf.object?.connectionEvent(peer, connected: connected) }
            remoteRole = role
        }
        startDevice()
    }

    deinit {
        // The daemon ends the session (its scan and connections with it).
        if let remoteRole, let remote { remote.loop.execute { remoteRole.close() } }
        // The role leaves the device (CBManager's deinit): its connections with it.
        if let device {
            let events = self.events
            device.loop.execute {
                events.releaseConnections()
                device.connectionEvents.unregister(events)
            }
        }
    }

    override func startRemote(_ remote: DaemonSessionHost) {
        guard let remoteRole else { return }
        let identifier = restoreIdentifier
        remote.loop.execute { [weakSelf = WeakHandle(self)] in
            remoteRole.open(restoreIdentifier: identifier, onRestore: { peers, scan in
                weakSelf.object?.restore(peers, scan: scan, role: remoteRole)
            }, onState: { state, reason in
                guard let self = weakSelf.object else { return }
                if state != CBManagerState.poweredOn.rawValue {
                    // What the device's stop does in the process (the daemon ended the links).
                    self.synchronized { self.isScanningStorage = false }
                    for peripheral in self.livePeripherals() { peripheral.linkClosed() }
                }
                self.deliverRemoteState(Int(state), reason: reason)
            })
        }
    }

    /// On the role's loop, before the first state: the daemon kept this manager's state (its
    /// restore identifier's) when an earlier process went. The peripherals come back in their
    /// state, with what was discovered on them and their subscriptions, and the delegate hears
    /// `centralManager(_:willRestoreState:)` with Apple's keys.
    private func restore(_ peers: [DaemonRestoredPeer], scan: DaemonRestoredScan?, role: RemoteCentralRole) {
        var restored: [CBPeripheral] = []
        for peer in peers {
            let peripheral = peripheral(for: peer.peer)
            let notifying = peripheral.restore(peer)
            synchronized { letGo(peripheral) }
            if peer.isConnected, let link = role.link(for: peer.peer) {
                link.events = peripheral.linkEvents
                for (handle, characteristic) in notifying {
                    role.resumeNotifications(from: peer.peer, handle: handle) { [peripheral = WeakHandle(peripheral)] bytes in
                        peripheral.object?.linkDelivered(bytes, for: characteristic)
                    }
                }
            }
            restored.append(peripheral)
        }
        var state: [String: Any] = [CBCentralManagerRestoredStatePeripheralsKey: restored]
        if let scan {
            synchronized { isScanningStorage = true }
            if let services = scan.services { state[CBCentralManagerRestoredStateScanServicesKey] = services.map { CBUUID(bluetoothUUID: $0) } }
            var options: [String: Any] = [CBCentralManagerScanOptionAllowDuplicatesKey: NSNumber(value: scan.allowDuplicates)]
            if !scan.solicited.isEmpty {
                options[CBCentralManagerScanOptionSolicitedServiceUUIDsKey] = scan.solicited.map { CBUUID(bluetoothUUID: $0) }
            }
            state[CBCentralManagerRestoredStateScanOptionsKey] = options
        }
        let dictionary = Unchecked(state)
        deliver { manager, delegate in delegate.centralManager(manager, willRestoreState: dictionary.value) }
    }

    override func stateDidChange() {
        delegate?.centralManagerDidUpdateState(self)
        for observer in synchronized({ taps.observers }) { observer.centralManagerDidUpdateState(self) }
    }

    /// Makes `observer` hear every delegate event of this manager, on its queue right after the
    /// delegate, until ``removeEventTap(_:)``: CoreBluetoothAsync's way in, which leaves the
    /// app's delegate alone.
    package func addEventTap(_ observer: CBCentralManagerDelegate) -> CBEventTapToken {
        synchronized { taps.add(observer) }
    }

    package func removeEventTap(_ token: CBEventTapToken) {
        _ = synchronized { taps.remove(token) }  // released after the lock (EventTaps.remove)
    }

    /// Whether the central can use `features` (here: whether its controller can).
    ///
    /// On Linux this asks the controller `CB_TRANSPORT` names (the default virtual one when unset):
    /// an external controller answers from its LE feature bits once a manager of this process
    /// powered it on, and false before (use ``linuxSupports(_:transport:)`` for another one).
    open class func supports(_ features: Feature) -> Bool {
        let transport = ProcessEnvironment.value(of: "CB_TRANSPORT").flatMap { $0.isEmpty ? nil : $0 } ?? "virtual"
        return linuxSupports(features, transport: transport)
    }

    /// **Linux extension.** ``supports(_:)`` for the controller `transport` names (a
    /// `CB_TRANSPORT` value, such as a manager's ``CBManagerOptionLinuxTransportKey``):
    /// `.extendedScanAndConnect` when it has extended advertising and scanning and the 2M or
    /// Coded PHY. An external controller is known once a manager of this process powered it on.
    public class func linuxSupports(_ features: Feature, transport: String) -> Bool {
        guard features.isSubset(of: [.extendedScanAndConnect]) else { return false }
        return features.isEmpty || LocalDevice.supportsExtendedScanAndConnect(transport: transport)
    }

    /// Whether a scan is running.
    open var isScanning: Bool { synchronized { isScanningStorage } }

    // MARK: - Device life

    override var deviceClient: (any HostDeviceClient)? { service }

    override func installPairingAgent(_ agent: (any PairingAgent)?) {
        service.pairingAgent = agent
        remoteRole?.pairingAgent = agent
    }

    override func deviceDidStart(_ hostDevice: HostDevice) {
        service.deviceDidStart(hostDevice)
    }

    override func deviceDidStop() {
        events.releaseConnections()
        service.deviceDidStop()
        synchronized { isScanningStorage = false }
        for peripheral in livePeripherals() {
            // The controller went away (powered off, reset, its transport closed): what was
            // under way on its links fails before the state change is heard.
            peripheral.linkClosed()
            peripheral.failPendingCalls(with: Self.disconnectedError)
        }
    }

    /// The error of a procedure a disconnection ended when the disconnection itself has none.
    static let disconnectedError = CBError(.peripheralDisconnected, description: "The specified device has disconnected from us.")

    /// Runs `body` on the device's loop with the central role, if the device is on: what the
    /// API asks goes through the role-service boundary.
    func onService(_ body: @escaping @Sendable (any CentralRole) -> Void) {
        if let remoteRole, let remote {
            remote.loop.execute {
                guard remoteRole.isOn else { return }
                body(remoteRole)
            }
            return
        }
        onInProcessService { body($0) }
    }

    /// ``onService(_:)`` with the in-process role service itself, for what has not crossed
    /// the boundary yet (pairing a link).
    func onInProcessService(_ body: @escaping @Sendable (CentralService) -> Void) {
        guard let device else { return }
        let service = self.service
        device.loop.execute {
            guard service.isOn else { return }
            body(service)
        }
    }

    // MARK: - Peripheral objects

    /// The peripheral object for the device at `address`: the one the app holds, or a new one
    /// (whose identifier the store then keeps). `discovered`: a scan reported it (the manager
    /// then holds the object while it is disconnected, see `keptPeripherals`).
    func peripheral(for address: LEAddress, advertisedName: String? = nil,
                    advertisedServices: Set<BluetoothUUID> = [], discovered: Bool = false) -> CBPeripheral {
        let store = identifiers
        // One look-up (and mark) for a device the store knows: every report but the first.
        var held: CBPeripheral?
        let identifier: UUID
        if let known = store.identifierMarkingSeen(for: address) {
            identifier = known
        } else {
            // An object the app still holds whose store entry was evicted keeps its identifier.
            held = synchronized { livePeripheral(at: address) }
            identifier = store.assignIdentifier(for: address, reusing: held?.identifier)
        }
        let key = PeripheralKey(identifier: identifier)
        return synchronized {
            if let kept = keptPeripherals[key] {
                kept.advertisementSeen(name: advertisedName, services: advertisedServices)
                let before = kept.addressStorage.normalized
                kept.moveIfDisconnected(to: address)
                if kept.addressStorage.normalized != before { keptAddresses[AddressKey(kept.addressStorage.normalized)] = key }
                return kept
            }
            if let existing = peripheralObjects[key]?.object ?? held {
                existing.advertisementSeen(name: advertisedName, services: advertisedServices)
                existing.moveIfDisconnected(to: address)
                if discovered { keep(existing, at: key) }
                return existing
            }
            let peripheral = CBPeripheral(identifier: identifier, address: address, name: advertisedName, manager: self)
            peripheral.advertisedServiceUUIDs = advertisedServices
            if discovered {
                keep(peripheral, at: key)
                return peripheral
            }
            peripheralObjects[key] = WeakPeripheral(object: peripheral)
            if peripheralObjects.count > pruneThreshold { pruneReleased() }
            return peripheral
        }
    }

    /// Under the lock: drops the entries of released objects. Removed in place: the table keeps
    /// its slots (a new one grew again from 8 slots, unspecialised, each time).
    private func pruneReleased() {
        let released = peripheralObjects.compactMap { $0.value.object == nil ? $0.key : nil }
        for key in released { peripheralObjects.removeValue(forKey: key) }
        pruneThreshold = max(Self.minimumPruneThreshold, 2 * peripheralObjects.count)
    }

    /// Under the lock: the manager holds `peripheral` (the object at `key`) while it is
    /// disconnected.
    private func keep(_ peripheral: CBPeripheral, at key: PeripheralKey) {
        guard peripheral.linkStateStorage == .disconnected else {
            if peripheralObjects[key] == nil { peripheralObjects[key] = WeakPeripheral(object: peripheral) }
            return
        }
        if keptPeripherals.count >= Self.keptPeripheralsLimit {
            // Let go of all of them: the app's own references keep the ones it uses.
            for (key, object) in keptPeripherals { peripheralObjects[key] = WeakPeripheral(object: object) }
            keptPeripherals.removeAll(keepingCapacity: true)
            keptAddresses.removeAll(keepingCapacity: true)
            pruneReleased()
        }
        peripheralObjects.removeValue(forKey: key)
        keptPeripherals[key] = peripheral
        keptAddresses[AddressKey(peripheral.addressStorage.normalized)] = key
    }

    /// Under the lock: the manager no longer holds `peripheral` (it is being connected: the
    /// app's references alone keep it, and releasing it cancels the connection).
    private func letGo(_ peripheral: CBPeripheral) {
        let key = PeripheralKey(identifier: peripheral.identifier)
        // Another manager's object for the same device (the app may connect one through this
        // manager) is not this one's to let go.
        guard keptPeripherals[key] === peripheral else { return }
        keptPeripherals.removeValue(forKey: key)
        let address = AddressKey(peripheral.addressStorage.normalized)
        if keptAddresses[address] == key { keptAddresses.removeValue(forKey: address) }
        peripheralObjects[key] = WeakPeripheral(object: peripheral)
    }

    /// The peripheral object the app holds for `address`, if any (never gives the device an
    /// identifier).
    func existingPeripheral(for address: LEAddress) -> CBPeripheral? {
        let identifier = identifiers.identifier(for: address)
        return synchronized {
            identifier.flatMap { keptPeripherals[PeripheralKey(identifier: $0)] ?? peripheralObjects[PeripheralKey(identifier: $0)]?.object }
                ?? livePeripheral(at: address)
        }
    }

    /// Under the lock: a held object at `address`, looked for one by one (when the store has
    /// no entry for the address, evicted while the app held the object).
    private func livePeripheral(at address: LEAddress) -> CBPeripheral? {
        let address = address.normalized
        if let key = keptAddresses[AddressKey(address)], let kept = keptPeripherals[key], kept.addressStorage.normalized == address {
            return kept
        }
        for (_, entry) in peripheralObjects {
            if let object = entry.object, object.addressStorage.normalized == address { return object }
        }
        return nil
    }

    private func livePeripherals() -> [CBPeripheral] {
        synchronized { keptPeripherals.values + peripheralObjects.values.compactMap(\.object) }
    }

    private var identifiers: IdentifierStore { identifierStore }

    /// A peripheral object went away: its connection, or pending connection, is cancelled.
    func peripheralReleased(address: LEAddress) {
        onService { [weakSelf = WeakHandle(self)] service in
            guard weakSelf.object?.existingPeripheral(for: address) == nil else { return }
            service.cancel(address, notify: false)
        }
    }

    // MARK: - Retrieving peripherals

    /// The peripherals with these identifiers that this device has seen (now, or in earlier runs
    /// at an identity address: a public or static random one, or a bonded peer's identity).
    open func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [CBPeripheral] {
        identifiers.compactMap { identifier in
            guard let address = self.identifiers.address(for: identifier) else { return nil }
            return peripheral(for: address)
        }
    }

    /// The peripherals connected to this device that have (or advertised) any of these services.
    open func retrieveConnectedPeripherals(withServices serviceUUIDs: [CBUUID]) -> [CBPeripheral] {
        let wanted = Set(serviceUUIDs.map(\.bluetoothUUID))
        return livePeripherals().filter { peripheral in
            peripheral.synchronized {
                peripheral.linkStateStorage == .connected
                    && !peripheral.knownServiceUUIDs.isDisjoint(with: wanted)
            }
        }.sorted { $0.identifier.uuidString < $1.identifier.uuidString }
    }

    // MARK: - Scanning

    /// Scans for peripherals advertising any of `serviceUUIDs` (all when nil); a new scan
    /// replaces the running one's services and options.
    ///
    /// Options: `CBCentralManagerScanOptionAllowDuplicatesKey` (a discovery for every
    /// advertising packet instead of one per device and advertisement) and
    /// `CBCentralManagerScanOptionSolicitedServiceUUIDsKey` (also devices soliciting these).
    open func scanForPeripherals(withServices serviceUUIDs: [CBUUID]?, options: [String: Any]? = nil) {
        guard requirePoweredOn("scanForPeripherals(withServices:options:)") else { return }
        let allowDuplicates = Self.bool(options?[CBCentralManagerScanOptionAllowDuplicatesKey])
        let solicited = (options?[CBCentralManagerScanOptionSolicitedServiceUUIDsKey] as? [CBUUID]) ?? []
        let request = ScanRequest(services: serviceUUIDs.map { Set($0.map(\.bluetoothUUID)) },
                                  solicited: Set(solicited.map(\.bluetoothUUID)), allowDuplicates: allowDuplicates)
        synchronized { isScanningStorage = true }
        onService { $0.startScan(request) }
    }

    /// Stops scanning.
    open func stopScan() {
        guard requirePoweredOn("stopScan()") else { return }
        synchronized { isScanningStorage = false }
        onService { $0.stopScan() }
    }

    /// The controller refused to scan.
    func scanFailed() {
        synchronized { isScanningStorage = false }
    }

    // MARK: - Connecting

    /// Connects to `peripheral`: never times out; stays pending until the peripheral appears
    /// or `cancelPeripheralConnection(_:)`. Keep a strong reference to `peripheral`: releasing
    /// it cancels the connection, as on iOS.
    open func connect(_ peripheral: CBPeripheral, options: [String: Any]? = nil) {
        guard requirePoweredOn("connect(_:options:)") else { return }
        guard peripheral.manager === self else {
            APIMisuse.report("connect(_:options:) with a peripheral of another central manager")
            return
        }
        // Where the device is reached now: a peer that bonded since is reached by identity.
        let current = identifiers.address(for: peripheral.identifier)
        let (shouldConnect, address) = peripheral.synchronized { () -> (Bool, LEAddress) in
            if let current { peripheral.moveIfDisconnected(to: current) }
            switch peripheral.linkStateStorage {
            case .disconnected, .disconnecting:
                peripheral.linkStateStorage = .connecting
                return (true, peripheral.addressStorage)
            case .connecting:
                return (false, peripheral.addressStorage)
            case .connected:
                return (true, peripheral.addressStorage)
            @unknown default:
                return (false, peripheral.addressStorage)
            }
        }
        guard shouldConnect else { return }
        // Held by the app alone from now on (releasing it cancels the connection). After the
        // peripheral's section: never two object locks at once.
        synchronized { letGo(peripheral) }
        let seconds = (options?[CBConnectPeripheralOptionStartDelayKey] as? NSNumber)?.doubleValue ?? 0
        // iOS 17: reconnect by itself after the peer goes away, until cancelled.
        let autoReconnect = Self.bool(options?[CBConnectPeripheralOptionEnableAutoReconnect])
        let delay: Duration = seconds > 0 ? .milliseconds(Int64(seconds * 1000)) : .zero
        let loop = roleLoop
        onService { service in
            if delay == .zero {
                service.connect(address, autoReconnect: autoReconnect)
            } else {
                _ = loop?.schedule(after: delay) { [weak service] in
                    guard let service, service.isOn else { return }
                    service.connect(address, autoReconnect: autoReconnect)
                }
            }
        }
    }

    /// Disconnects from `peripheral`, or cancels a pending connection;
    /// `centralManager(_:didDisconnectPeripheral:error:)` follows with no error.
    open func cancelPeripheralConnection(_ peripheral: CBPeripheral) {
        guard requirePoweredOn("cancelPeripheralConnection(_:)") else { return }
        let address = peripheral.address
        // The peripheral's lock: the app may pass another manager's peripheral.
        let active = peripheral.synchronized { () -> Bool in
            switch peripheral.linkStateStorage {
            case .connected:
                peripheral.linkStateStorage = .disconnecting
                return true
            case .connecting:
                return true
            default:
                return false
            }
        }
        guard active else { return }
        onService { $0.cancel(address, notify: true) }
    }

    /// Asks for `centralManager(_:connectionEventDidOccur:for:)` when a matching peripheral
    /// connects to or disconnects from the device, whoever made the connection: peripherals
    /// with any of the `.serviceUUIDs` (advertised or discovered) and among the
    /// `.peripheralUUIDs` (each: any when absent).
    ///
    /// On Linux this reports the connections the device's central managers make — those of
    /// every client of `corebluetoothd` for a manager on it (`CB_TRANSPORT=daemon`), else those
    /// of the managers of this process sharing its controller (an external one: on the virtual
    /// radio each manager is a device of its own) — and those remote centrals make to the
    /// device (it as peripheral), whichever peripheral manager serves them.
    open func registerForConnectionEvents(options: [CBConnectionEventMatchingOption: Any]? = nil) {
        let services = (options?[.serviceUUIDs] as? [CBUUID]).map { $0.map(\.bluetoothUUID) }
        let store = identifiers
        let peripherals = (options?[.peripheralUUIDs] as? [UUID]).map { $0.compactMap { store.address(for: $0) } }
        if let remoteRole, let remote {
            remote.loop.execute { remoteRole.registerConnectionEvents(services: services, peripherals: peripherals) }
            return
        }
        guard let device else { return }
        let events = self.events
        let filter = ConnectionEvents.Filter(services: services.map(Set.init), peripherals: peripherals.map(Set.init))
        device.loop.execute {
            device.connectionEvents.register(events, filter: filter) { [events = WeakHandle(events)] peer, connected in
                events.object?.manager?.connectionEvent(peer, connected: connected)
            }
        }
    }

    /// On the role's loop: a connection event (the daemon's, or the process's device's).
    func connectionEvent(_ peer: LEAddress, connected: Bool) {
        let peripheral = peripheral(for: peer)
        let event: CBConnectionEvent = connected ? .peerConnected : .peerDisconnected
        deliver { manager, delegate in delegate.centralManager(manager, connectionEventDidOccur: event, for: peripheral) }
    }

    // MARK: - Delegate calls (from the loop)

    /// Calls the delegate, then the tap's observers, on its queue (nothing if the manager is gone).
    func deliver(_ body: @escaping @Sendable (CBCentralManager, CBCentralManagerDelegate) -> Void) {
        callbacks.async { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            if let delegate = self.delegate { body(self, delegate) }
            for observer in self.synchronized({ self.taps.observers }) { body(self, observer) }
        }
    }

    /// ``deliver(_:)`` for a discovery, one closure instead of two: a scan with duplicates
    /// allowed makes one per advertising packet.
    func deliverDiscovery(_ peripheral: CBPeripheral, advertisementData: Unchecked<[String: Any]>, rssi: NSNumber) {
        callbacks.async { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            if let delegate = self.delegate {
                delegate.centralManager(self, didDiscover: peripheral, advertisementData: advertisementData.value, rssi: rssi)
            }
            for observer in self.synchronized({ self.taps.observers }) {
                observer.centralManager(self, didDiscover: peripheral, advertisementData: advertisementData.value, rssi: rssi)
            }
        }
    }

    func didConnect(_ peripheral: CBPeripheral) {
        peripheral.synchronized { peripheral.linkStateStorage = .connected }
        synchronized { letGo(peripheral) }
        deliver { manager, delegate in delegate.centralManager(manager, didConnect: peripheral) }
    }

    func didFailToConnect(_ peripheral: CBPeripheral, error: CBError) {
        peripheral.synchronized { peripheral.linkStateStorage = .disconnected }
        deliver { manager, delegate in delegate.centralManager(manager, didFailToConnect: peripheral, error: error) }
    }

    /// The connection ended; with `isReconnecting` (auto-reconnect) the peripheral is being
    /// connected again and stays `.connecting` until `didConnect`.
    func didDisconnect(_ peripheral: CBPeripheral, error: CBError?, isReconnecting: Bool = false) {
        peripheral.synchronized { peripheral.linkStateStorage = isReconnecting ? .connecting : .disconnected }
        // No call is accepted from here on; those under way answer first, with the
        // disconnection's error (the app's own cancellation has none: the peripheral disconnected).
        peripheral.failPendingCalls(with: error ?? Self.disconnectedError)
        let timestamp = Date().timeIntervalSinceReferenceDate
        deliver { manager, delegate in
            delegate.centralManager(manager, didDisconnectPeripheral: peripheral, timestamp: timestamp,
                                    isReconnecting: isReconnecting, error: error)
        }
    }

    /// Apple's Bool options arrive as NSNumber or Bool.
    static func bool(_ value: Any?) -> Bool {
        if let value = value as? Bool { return value }
        if let value = value as? NSNumber { return value.boolValue }
        return false
    }
}
