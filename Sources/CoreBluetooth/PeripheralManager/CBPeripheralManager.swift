import AssignedNumbers
import Dispatch
import Foundation
import HostDevice
import HostStack

/// The local device as a peripheral: publishes a GATT database, advertises, answers centrals.
open class CBPeripheralManager: CBManager, @unchecked Sendable {
    private weak var delegateStorage: CBPeripheralManagerDelegate?
    private var isAdvertisingStorage = false
    /// Everything on the device's loop: services, connections, requests, updates.
    let engine = PeripheralEngine()

    /// Who hears about state, requests and subscriptions (held weakly).
    public weak var delegate: CBPeripheralManagerDelegate? {
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
        super.init(queue: queue, options: options)
        delegateStorage = delegate
        engine.manager = self
        startDevice()
    }

    override func stateDidChange() {
        delegate?.peripheralManagerDidUpdateState(self)
    }

    override var deviceClient: (any HostDeviceClient)? { engine }

    override func deviceDidStart(_ hostDevice: HostDevice) {
        engine.deviceDidStart(hostDevice)
    }

    override func deviceDidStop() {
        engine.deviceDidStop()
    }

    /// Runs `body` on the device's loop with the engine, if the device is up.
    private func onEngine(_ body: @escaping @Sendable (PeripheralEngine) -> Void) {
        guard let device else { return }
        let engine = self.engine
        device.loop.execute { if engine.isOn { body(engine) } }
    }

    /// Runs `body` on the delegate queue with the delegate.
    private func deliver(_ body: @escaping @Sendable (CBPeripheralManager, CBPeripheralManagerDelegate?) -> Void) {
        callbacks.async { [weak self] in
            guard let self else { return }
            body(self, self.delegate)
        }
    }

    /// Sharing data while in the background: always authorised on Linux.
    @available(*, deprecated, message: "Use CBManager.authorization instead")
    open class func authorizationStatus() -> CBPeripheralManagerAuthorizationStatus { .authorized }

    /// Whether advertising is on: true from the successful start until `stopAdvertising()` or
    /// power off. It stays true while centrals are connected (advertising goes on then).
    public var isAdvertising: Bool { synchronized { isAdvertisingStorage } }

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
    open func startAdvertising(_ advertisementData: [String: Any]?) {
        guard requirePoweredOn("startAdvertising(_:)") else { return }
        var name: String?
        var serviceUUIDs: [BluetoothUUID] = []
        var manufacturerData: [UInt8]?
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
            default:
                problem = "\(key) cannot be advertised; only CBAdvertisementDataLocalNameKey and CBAdvertisementDataServiceUUIDsKey can"
                    + " (and, as a Linux extension, CBAdvertisementDataLinuxManufacturerDataKey)"
            }
            if problem != nil { break }
        }
        if let problem {
            let error = CBError(.invalidParameters, userInfo: [NSLocalizedDescriptionKey: problem])
            deliver { manager, delegate in delegate?.peripheralManagerDidStartAdvertising(manager, error: error) }
            return
        }
        let (localName, uuids, manufacturer) = (name, serviceUUIDs, manufacturerData)
        onEngine { $0.startAdvertising(name: localName, serviceUUIDs: uuids, manufacturerData: manufacturer) }
    }

    /// Stops advertising.
    open func stopAdvertising() {
        guard requirePoweredOn("stopAdvertising()") else { return }
        setAdvertisingFlag(false)
        onEngine { $0.stopAdvertising() }
    }

    /// Asks `central` for a connection interval matching `latency`: 7.5–15 ms for `.low`,
    /// 30–50 ms for `.medium`, 100–150 ms for `.high`.
    open func setDesiredConnectionLatency(_ latency: CBPeripheralManagerConnectionLatency, for central: CBCentral) {
        guard requirePoweredOn("setDesiredConnectionLatency(_:for:)") else { return }
        onEngine { $0.setDesiredConnectionLatency(latency, for: central) }
    }

    /// Publishes `service` (and its characteristics and descriptors): `peripheralManager(_:didAdd:error:)`.
    /// The service is taken as it is now; later changes of the mutable objects do not alter
    /// the published database. Included services must be published first.
    open func add(_ service: CBMutableService) {
        guard requirePoweredOn("add(_:)") else { return }
        switch ServiceBlueprint.make(service) {
        case .success(let blueprint):
            onEngine { $0.publish(blueprint) }
        case .failure(let error):
            APIMisuse.report("add(_:) of service \(service.uuid): \(error.userInfo[NSLocalizedDescriptionKey] as? String ?? "\(error.code)")")
            deliver { manager, delegate in delegate?.peripheralManager(manager, didAdd: service, error: error) }
        }
    }

    /// Removes a published service (not one another published service includes).
    open func remove(_ service: CBMutableService) {
        guard requirePoweredOn("remove(_:)") else { return }
        onEngine { $0.unpublish(service) }
    }

    /// Removes every published service.
    open func removeAllServices() {
        guard requirePoweredOn("removeAllServices()") else { return }
        onEngine { $0.unpublishAll() }
    }

    /// Answers a read or write request: once per `didReceiveRead`, and once per
    /// `didReceiveWrite` (with its first request, all or nothing). For a read, `request.value`
    /// holds the bytes from `request.offset` on. Answers to Write Commands are ignored.
    open func respond(to request: CBATTRequest, withResult result: CBATTError.Code) {
        let id = request.transaction
        guard id >= 0 else { return }
        guard engine.outstanding.withLock({ $0.remove(id) != nil }) else {
            APIMisuse.report("respond(to:withResult:) for a request that was already answered or is unknown (or whose central disconnected)")
            return
        }
        let value = request.value
        onEngine { $0.answer(id, result, value: value) }
    }

    /// Sends `value` to the subscribed centrals (all when `centrals` is nil), as a notification
    /// or an indication as each central asked, cut to its `maximumUpdateValueLength`. False
    /// when the transmit queue is full: `peripheralManagerIsReady(toUpdateSubscribers:)`
    /// follows once there is room. Callable from any thread; never waits for the stack.
    open func updateValue(_ value: Data, for characteristic: CBMutableCharacteristic,
                          onSubscribedCentrals centrals: [CBCentral]?) -> Bool {
        guard requirePoweredOn("updateValue(_:for:onSubscribedCentrals:)"), let device else { return false }
        let (accepted, needsDrain) = engine.inbox.withLock {
            $0.accept(AcceptedUpdate(characteristic: characteristic, value: value, centrals: centrals))
        }
        if needsDrain {
            let engine = self.engine
            device.loop.execute { engine.drainInbox() }
        }
        return accepted
    }

    /// Publishes an L2CAP channel: not supported on Linux yet, so
    /// `peripheralManager(_:didPublishL2CAPChannel:error:)` reports `operationNotSupported`.
    open func publishL2CAPChannel(withEncryption encryptionRequired: Bool) {
        guard requirePoweredOn("publishL2CAPChannel(withEncryption:)") else { return }
        let error = CBError(.operationNotSupported, userInfo: [NSLocalizedDescriptionKey: "L2CAP channels are not supported on Linux yet"])
        deliver { manager, delegate in delegate?.peripheralManager(manager, didPublishL2CAPChannel: 0, error: error) }
    }

    /// Unpublishes an L2CAP channel: `peripheralManager(_:didUnpublishL2CAPChannel:error:)`
    /// reports `operationNotSupported`, as nothing can be published yet.
    open func unpublishL2CAPChannel(_ PSM: CBL2CAPPSM) {
        guard requirePoweredOn("unpublishL2CAPChannel(_:)") else { return }
        let error = CBError(.operationNotSupported, userInfo: [NSLocalizedDescriptionKey: "L2CAP channels are not supported on Linux yet"])
        deliver { manager, delegate in delegate?.peripheralManager(manager, didUnpublishL2CAPChannel: PSM, error: error) }
    }
}
