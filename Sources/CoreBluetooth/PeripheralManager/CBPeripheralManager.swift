import Dispatch
import Foundation
import HostStack

/// The local device as a peripheral: publishes a GATT database, advertises, answers centrals.
open class CBPeripheralManager: CBManager, @unchecked Sendable {
    private weak var delegateStorage: CBPeripheralManagerDelegate?

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
        startDevice()
    }

    override func stateDidChange() {
        delegate?.peripheralManagerDidUpdateState(self)
    }

    /// Sharing data while in the background: always authorised on Linux.
    @available(*, deprecated, message: "Use CBManager.authorization instead")
    open class func authorizationStatus() -> CBPeripheralManagerAuthorizationStatus { .authorized }

    /// Whether advertising is on.
    public var isAdvertising: Bool { false }

    /// Advertises `CBAdvertisementDataLocalNameKey` and `CBAdvertisementDataServiceUUIDsKey`
    /// (no other key): `peripheralManagerDidStartAdvertising(_:error:)`.
    open func startAdvertising(_ advertisementData: [String: Any]?) {
        guard requirePoweredOn("startAdvertising(_:)") else { return }
    }

    /// Stops advertising.
    open func stopAdvertising() {}

    /// Asks for a connection interval matching `latency` with `central`.
    open func setDesiredConnectionLatency(_ latency: CBPeripheralManagerConnectionLatency, for central: CBCentral) {}

    /// Publishes `service` (and its characteristics and descriptors): `peripheralManager(_:didAdd:error:)`.
    open func add(_ service: CBMutableService) {
        guard requirePoweredOn("add(_:)") else { return }
    }

    /// Removes a published service.
    open func remove(_ service: CBMutableService) {}

    /// Removes every published service.
    open func removeAllServices() {}

    /// Answers a read or write request (for writes: once, with the first request).
    open func respond(to request: CBATTRequest, withResult result: CBATTError.Code) {}

    /// Sends `value` to the subscribed centrals (all when `centrals` is nil). False when the
    /// transmit queue is full: `peripheralManagerIsReady(toUpdateSubscribers:)` follows.
    open func updateValue(_ value: Data, for characteristic: CBMutableCharacteristic,
                          onSubscribedCentrals centrals: [CBCentral]?) -> Bool { false }

    /// Publishes an L2CAP channel (later work on Linux: reports operationNotSupported).
    open func publishL2CAPChannel(withEncryption encryptionRequired: Bool) {}

    /// Unpublishes an L2CAP channel.
    open func unpublishL2CAPChannel(_ PSM: CBL2CAPPSM) {}
}
