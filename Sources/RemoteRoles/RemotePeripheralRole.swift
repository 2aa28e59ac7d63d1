import ATT
import AssignedNumbers
import DaemonProtocol
import Foundation // `Data`: the app's update values
import GATT
import HCI
import HCIDriver
import HostDevice
import RoleServices
import SMP
import Scheduling

/// The peripheral role of a manager whose device is `corebluetoothd`'s: each call a message,
/// each message of its session an event, as ``PeripheralService`` gives them in the process.
/// The daemon's service holds the services, advertising set and links; requests for this
/// manager's attributes (and only those) come here to be answered.
///
/// Loop-confined (the host's loop) once ``open(onState:)`` ran, except `acceptUpdate`, which
/// the app's threads call: the update budget is kept here, in an inbox behind its lock, and
/// the daemon returns slots as it hands values on (`updatesHandedOver`).
public final class RemotePeripheralRole: PeripheralRole, @unchecked Sendable {
    public weak var events: PeripheralServiceEvents?
    private let host: DaemonSessionHost
    private var session: UInt32?
    private var state: UInt8 = 0
    private let inbox = Locked(UpdateInbox())
    private var drained: [PeripheralUpdate] = []
    private var nextRequest: UInt32 = 1
    private var publishRequests: [UInt32: (Result<UInt16, ChannelPublishError>) -> Void] = [:]
    private var unpublishRequests: [UInt32: (Bool) -> Void] = [:]
    private var channels: RemoteChannels!
    private let pairing: RemotePairing

    public init(host: DaemonSessionHost) {
        self.host = host
        pairing = RemotePairing(loop: host.loop) { [host] in host.version }
        channels = RemoteChannels { [weak self] make in self?.send(make) }
        pairing.sendMessage = { [weak self] make in self?.send(make) }
    }

    /// Any thread: the daemon asks it the pairing prompts of this session's links.
    public var pairingAgent: (any PairingAgent)? {
        get { pairing.agent }
        set { pairing.agent = newValue }
    }

    /// Whether the daemon's device is on for this session.
    public var isOn: Bool { session != nil && state == 5 }

    /// What a daemon kept for a restored session: its published services, its advertisement
    /// (nil: not advertising), its connected centrals with their subscriptions.
    public typealias Restored = (services: [DaemonRestoredLocalService], advertisement: DaemonAdvertisement?,
                                 centrals: [DaemonRestoredCentral])

    /// On the loop: opens the session; `onState` gets each state the daemon reports (a
    /// `CBManagerState` raw value, and why it is not on), and `unsupported` with the reason if
    /// the connection to the daemon ends. With `restoreIdentifier`, the daemon keeps the
    /// session when this process goes; and if it kept one under that identifier, `onRestore`
    /// gets what it kept before the first state (its services are this role's, under the keys
    /// they had; its centrals' ids are those of later events).
    public func open(restoreIdentifier: String? = nil, onRestore: @escaping (Restored) -> Void = { _ in },
                     onState: @escaping (UInt8, String?) -> Void) {
        let id = host.openSession({ [weak self] message in
            self?.handle(message, onRestore: onRestore, onState: onState)
        }, lost: { [weak self] reason, permanent in
            // The daemon went: `.resetting` while the host connects again, `.unsupported` when
            // it will not. Its database went with it: the app publishes again once on.
            guard let self else { return }
            let newState: UInt8 = permanent ? 2 : 1
            state = newState
            inbox.withLock { $0.reset() }
            // Its PSMs and channels went with it.
            let publishing = publishRequests, unpublishing = unpublishRequests
            publishRequests = [:]
            unpublishRequests = [:]
            for completion in publishing.values { completion(.failure(.noFreePSM)) }
            for completion in unpublishing.values { completion(false) }
            channels.closeAll()
            onState(newState, "corebluetoothd at \(host.path): \(reason)")
        }, reopen: { [weak self] in
            // A daemon that came back: the session opens again there (its state follows).
            guard let self, let session else { return }
            host.send(.openPeripheral(session: session, restoreIdentifier: restoreIdentifier))
            pairing.sessionOpened()
        })
        session = id
        host.send(.openPeripheral(session: id, restoreIdentifier: restoreIdentifier))
        pairing.sessionOpened()
    }

    /// The manager went: the daemon ends the session (its services leave the database, its
    /// advertising stops).
    public func close() {
        guard let session else { return }
        self.session = nil
        host.closeSession(session)
    }

    private func send(_ make: (UInt32) -> DaemonMessage) {
        guard let session else { return }
        host.send(make(session))
    }

    // MARK: - Calls

    public func publish(_ definition: GATTService, key: Int, includedKeys: [Int]) {
        var definition = definition
        definition.includedServices = [] // named by key on the wire
        send { .publish(session: $0, key: UInt32(truncatingIfNeeded: key), includedKeys: includedKeys.map { UInt32(truncatingIfNeeded: $0) },
                        service: definition) }
    }

    public func unpublish(_ key: Int) { send { .unpublish(session: $0, key: UInt32(truncatingIfNeeded: key)) } }

    public func unpublishAll() { send { .unpublishAll(session: $0) } }

    public func startAdvertising(name: String?, serviceUUIDs: [BluetoothUUID], manufacturerData: [UInt8]?,
                                 raw: (advertisement: [UInt8], scanResponse: [UInt8])?) {
        let advertisement = DaemonAdvertisement(name: name, serviceUUIDs: serviceUUIDs, manufacturerData: manufacturerData,
                                                raw: raw.map { DaemonAdvertisement.Raw(advertisement: $0.advertisement, scanResponse: $0.scanResponse) })
        send { .startAdvertising(session: $0, advertisement: advertisement) }
    }

    public func stopAdvertising() {
        // As the service does: the API side hears it at once.
        events?.peripheralAdvertisingStopped(self)
        send { .stopAdvertising(session: $0) }
    }

    public func setDesiredConnectionLatency(_ latency: PeripheralConnectionLatency, for central: Int) {
        let level: UInt8 = switch latency {
        case .low: 0
        case .medium: 1
        case .high: 2
        }
        send { .setLatency(session: $0, central: UInt32(truncatingIfNeeded: central), latency: level) }
    }

    public func answer(_ id: Int, error: ATTErrorCode?, value: [UInt8]?) {
        guard id >= 0 else { return }
        send { .answer(session: $0, request: UInt32(truncatingIfNeeded: id), error: error?.rawValue, value: value) }
    }

    public func acceptUpdate(_ update: consuming PeripheralUpdate) -> (accepted: Bool, needsDrain: Bool) {
        inbox.accept(update)
    }

    /// Sends what `acceptUpdate` took, in order; the slots come back with `updatesHandedOver`.
    public func drainInbox() {
        inbox.withLock { $0.take(into: &drained) }
        guard let session else {
            drained.removeAll(keepingCapacity: true)
            return
        }
        for update in drained {
            host.send(.update(session: session, handle: update.handle, value: [UInt8](update.value),
                              centrals: update.centrals?.map { UInt32(truncatingIfNeeded: $0) }))
        }
        drained.removeAll(keepingCapacity: true)
    }

    /// The PSM is this process's: the daemon unpublishes it when the process goes.
    public func publishChannel(psm: UInt16?, requiresEncryption: Bool,
                               completion: @escaping (Result<UInt16, ChannelPublishError>) -> Void) {
        // A daemon of protocol version 1 has no channels.
        guard let session, host.version >= 2 else { return completion(.failure(.noFreePSM)) }
        let id = request()
        publishRequests[id] = completion
        host.send(.publishChannel(session: session, request: id, psm: psm, requiresEncryption: requiresEncryption))
    }

    public func unpublishChannel(_ psm: UInt16, completion: @escaping (Bool) -> Void) {
        guard let session, host.version >= 2 else { return completion(false) }
        let id = request()
        unpublishRequests[id] = completion
        host.send(.unpublishChannel(session: session, request: id, psm: psm))
    }

    private func request() -> UInt32 {
        defer { nextRequest &+= 1 }
        return nextRequest
    }

    // MARK: - Messages

    private func handle(_ message: DaemonMessage, onRestore: (Restored) -> Void, onState: (UInt8, String?) -> Void) {
        switch message {
        case .restorePeripheralState(_, let services, let advertisement, let centrals):
            onRestore((services, advertisement, centrals))
        case .state(_, let newState, let reason):
            pairing.stateArrived()
            state = newState
            if !isOn { inbox.withLock { $0.reset() } }
            onState(newState, reason)
        case .published(_, let key, let result):
            let mapped: Result<GATTServiceHandles, PeripheralPublishError> = result.mapError {
                switch $0 {
                case .alreadyPublished: .alreadyPublished
                case .includedServiceNotPublished(let included): .includedServiceNotPublished(key: Int(included))
                case .database(let error): .database(error)
                }
            }
            events?.peripheral(self, didPublish: Int(key), result: mapped)
        case .unpublished(_, let key, let error):
            let mapped: PeripheralUnpublishError? = error.map {
                switch $0 {
                case .notPublished: .notPublished
                case .included(let includer): .included(byKey: Int(includer))
                case .database(let error): .database(error)
                }
            }
            events?.peripheral(self, didUnpublish: Int(key), error: mapped)
        case .advertisingStarted(_, let error, let isOn):
            let mapped: PeripheralAdvertisingError? = error.map {
                switch $0 {
                case .alreadyAdvertising: .alreadyAdvertising
                case .manufacturerDataDoesNotFit(let count): .manufacturerDataDoesNotFit(byteCount: Int(count))
                case .refused(let text): .refused(.notSupported(text))
                }
            }
            events?.peripheral(self, didStartAdvertising: mapped, isOn: isOn)
        case .advertisingStopped:
            events?.peripheralAdvertisingStopped(self)
        case .centralConnected(_, let central, let peer, let mtu):
            events?.peripheral(self, centralConnected: Int(central), peer: peer, mtu: Int(mtu))
        case .centralMTU(_, let central, let mtu):
            events?.peripheral(self, central: Int(central), mtuChanged: Int(mtu))
        case .centralDisconnected(_, let central, let abandoned):
            events?.peripheral(self, centralDisconnected: Int(central), abandonedRequests: abandoned.map { Int($0) })
        case .readRequest(_, let request, let central, let handle, let offset):
            events?.peripheral(self, readRequest: Int(request), central: Int(central), handle: handle, offset: Int(offset))
        case .writeRequest(_, let request, let writes):
            let mapped = writes.map { PeripheralWrite(central: Int($0.central), handle: $0.handle, offset: Int($0.offset), value: $0.value) }
            events?.peripheral(self, writeRequest: request.map { Int($0) } ?? -1, writes: mapped)
        case .subscribed(_, let central, let handle):
            events?.peripheral(self, central: Int(central), subscribedTo: handle)
        case .unsubscribed(_, let central, let handle):
            events?.peripheral(self, central: Int(central), unsubscribedFrom: handle)
        case .updatesHandedOver(_, let count):
            if inbox.withLock({ $0.release(Int(count)) }) { events?.peripheralReadyToUpdateSubscribers(self) }
        case .channelPublished(_, let id, let result):
            publishRequests.removeValue(forKey: id)?(result.mapError(ChannelPublishError.init))
        case .channelUnpublished(_, let id, let wasPublished):
            unpublishRequests.removeValue(forKey: id)?(wasPublished)
        case .channelIncoming(_, let id, let central, let peer, let psm):
            let channel = channels.channel(id, psm: psm, peer: peer)
            guard let events else { return channel.close() }
            events.peripheral(self, central: Int(central), didOpen: channel)
        default:
            if channels.handle(message) { return }
            _ = pairing.handle(message)
        }
    }
}
