import ATT
import AssignedNumbers
import GATT
import HostDevice
import HCI
import HostStack
import Logging
import Scheduling
import StackLogging

/// What a central link tells the API side's object for the peer (a `CBPeripheral`): values
/// only. Called on the device's loop.
public protocol CentralLinkEvents: AnyObject {
    /// ATT_MTU now (also once when the link is taken, with the exchanged value).
    func linkMTUChanged(_ mtu: Int)
    /// The peer's GAP Device Name, read on connection.
    func linkReadName(_ name: String)
    /// The peer's Service Changed indication: what was discovered in `range` is stale.
    func linkServicesChanged(_ range: ClosedRange<ATTHandle>)
    /// Writes without response handed to the controller since the last call.
    func linkReturnedWriteBudget(_ count: Int)
    /// The link is gone: nothing more is sent or delivered.
    func linkClosed()
}

/// One connection of the central role to a peripheral, on the device's loop: the device's
/// connection (its ATT bearer, GATT client — whose procedures take and give values — and the
/// device's GATT server answering on it), what iOS does on each connection (the peripheral's
/// name, Service Changed), and the queue of writes without response that feeds the link as
/// fast as its buffers drain.
///
/// Loop-confined.
public final class CentralLink: ATTBearerListener, CentralRoleLink, @unchecked Sendable {
    /// Debug builds check that every entry point runs on the loop (issue 17); release builds
    /// compile it away.
    @inline(__always)
    func assertOnLoop(file: StaticString = #file, line: UInt = #line) {
        loop.assertConfined("CentralLink", file: file, line: line)
    }

    public let connection: DeviceConnection
    /// Who hears of the link on the API side; nil until the API side takes the link.
    @exclusivity(unchecked) private var eventsHeld = WeakHeldExistential<any CentralLinkEvents>(wrappedValue: nil)  // exclusivity checks: 0.06 % of pair
    public var events: (any CentralLinkEvents)? {
        get { eventsHeld.wrappedValue }
        set { eventsHeld.wrappedValue = newValue }
    }
    /// Set when the API side cancelled it.
    var cancellation: CentralDisconnection?
    /// Writes without response the link's buffers have not taken yet, and the GATT procedures
    /// the API side asked for after them: everything goes out in the order it was asked for (a
    /// write with response after a stream of writes without response, as a firmware update's
    /// commit, must not pass the last of them).
    @exclusivity(unchecked) private var queued = RingBuffer<Queued>(capacity: 64)  // exclusivity checks: 0.06 % of pair

    private enum Queued {
        case write(handle: ATTHandle, value: [UInt8])
        case procedure(() -> Void)
    }
    @exclusivity(unchecked) public private(set) var isClosed = false  // exclusivity checks: 0.06 % of pair
    /// `corebluetooth.api`, tagged with the connection; made when first used.
    var logger: Logger { lazyLogger.logger }
    private var lazyLogger: LazyLogger

    init(connection: DeviceConnection) {
        self.connection = connection
        lazyLogger = LazyLogger(.api, link: connection.logContext)
    }

    public var peer: LEAddress { connection.peer }
    public var bearer: ATTBearer { connection.bearer }
    /// The GATT client procedures the API side runs on the peer's database.
    public var client: GATTClient { connection.client }
    public var loop: EventLoop { connection.loop }
    public var mtu: Int { bearer.mtu }

    /// The link is taken (the device exchanged the ATT MTU): what iOS does on every
    /// connection, queued before anything the app asks: learn the peripheral's GAP name, and
    /// ask for Service Changed indications.
    func start() {
        bearer.addListener(self)
        client.onReadyToSendWriteWithoutResponse = { [weakSelf = WeakHandle(self)] in weakSelf.object?.drainQueued() }
        client.onServiceChanged = { [weakSelf = WeakHandle(self)] range in weakSelf.object?.events?.linkServicesChanged(range) }
        events?.linkMTUChanged(bearer.mtu)
        readDeviceName()
        subscribeToServiceChanged()
    }

    public func attBearerMTUDidChange(to mtu: Int) { events?.linkMTUChanged(mtu) }

    private func readDeviceName() {
        client.readValues(ofType: .deviceName) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, case .success(let values) = result, let first = values.first,
                  let name = String(validating: first.value, as: UTF8.self), !name.isEmpty else { return }
            self.events?.linkReadName(name)
        }
    }

    private func subscribeToServiceChanged() {
        client.discoverPrimaryServices(uuid: .genericAttributeService) { [weakSelf = WeakHandle(self)] result in
            let `self` = weakSelf.object
            guard let self, case .success(let services) = result, let service = services.first else { return }
            self.client.discoverCharacteristics(of: service, uuid: .serviceChanged) { [weakSelf = WeakHandle(self)] result in
                let `self` = weakSelf.object
                guard let self, case .success(let found) = result, let characteristic = found.first,
                      characteristic.properties.contains(.indicate) else { return }
                self.client.subscribe(to: characteristic, onValue: { _ in }) { result in
                    if case .failure(let error) = result { self.logger.warning("Service Changed subscription failed: \(error)") }
                }
            }
        }
    }

    // MARK: The GATT procedures (the boundary's, on the connection's GATT client)

    public func discoverPrimaryServices(uuid: BluetoothUUID?,
                                        completion: @escaping (Result<[DiscoveredService], GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in
            guard let uuid else { return client.discoverPrimaryServices(completion: completion) }
            client.discoverPrimaryServices(uuid: uuid, completion: completion)
        }
    }

    public func discoverIncludedServices(of service: DiscoveredService,
                                         completion: @escaping (Result<[DiscoveredIncludedService], GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in client.discoverIncludedServices(of: service, completion: completion) }
    }

    public func discoverCharacteristics(of service: DiscoveredService,
                                        completion: @escaping (Result<[DiscoveredCharacteristic], GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in client.discoverCharacteristics(of: service, completion: completion) }
    }

    public func discoverDescriptors(of characteristic: DiscoveredCharacteristic,
                                    completion: @escaping (Result<[DiscoveredDescriptor], GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in client.discoverDescriptors(of: characteristic, completion: completion) }
    }

    public func readValue(of handle: ATTHandle, completion: @escaping (Result<[UInt8], GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in client.readValue(of: handle, completion: completion) }
    }

    public func writeValue(_ value: [UInt8], to handle: ATTHandle, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in client.writeValue(value, to: handle, completion: completion) }
    }

    public func subscribe(to characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                          onValue: @escaping ([UInt8]) -> Void, completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in
            client.subscribe(to: characteristic, clientConfiguration: clientConfiguration, onValue: onValue,
                             completion: { completion($0.map { _ in () }) })
        }
    }

    public func unsubscribe(from characteristic: DiscoveredCharacteristic, clientConfiguration: ATTHandle?,
                            completion: @escaping (Result<Void, GATTClientError>) -> Void) {
        assertOnLoop()
        afterQueuedWrites { [client] in
            client.unsubscribe(from: characteristic, clientConfiguration: clientConfiguration, completion: completion)
        }
    }

    // MARK: Writes without response, and what was asked after them

    /// Queues a write without response; it goes out as soon as the link's buffers take it.
    public func enqueueWrite(_ value: [UInt8], to handle: ATTHandle) {
        assertOnLoop()
        queued.append(.write(handle: handle, value: value))
        drainQueued()
    }

    /// Starts `procedure` now, or after the writes without response queued before it.
    private func afterQueuedWrites(_ procedure: @escaping () -> Void) {
        if queued.isEmpty { return procedure() }
        queued.append(.procedure(procedure))
    }

    private func drainQueued() {
        var sent = 0
        let limit = ATTMTU.maximumWriteValueLength(mtu: bearer.mtu)
        draining: while let next = queued.first {
            switch next {
            case .write(let handle, let value):
                if value.count > limit {
                    // Longer than one Write Command can carry: nothing can send it.
                    logger.debug("write without response of \(value.count) bytes dropped: at most \(limit) fit")
                } else if !client.writeWithoutResponse(value, to: handle) {
                    break draining
                }
                _ = queued.popFirst()
                sent += 1
            case .procedure(let procedure):
                _ = queued.popFirst()
                procedure()
            }
        }
        if sent > 0 { events?.linkReturnedWriteBudget(sent) }
    }

    /// The connection is gone: nothing more is sent or delivered.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        // Writes without response are dropped; the procedures go to the GATT client, which
        // fails them with the link's end as it fails those it queued itself.
        while let next = queued.popFirst() {
            if case .procedure(let procedure) = next { procedure() }
        }
        bearer.removeListener(self)
        events?.linkClosed()
    }
}
