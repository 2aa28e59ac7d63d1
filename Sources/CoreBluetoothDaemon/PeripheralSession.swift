import ATT
import AssignedNumbers
import DaemonProtocol
import Foundation // `Data`, as the role service takes an update's value
import GATT
import HCI
import HCITransport
import HostDevice
import RoleServices
import Scheduling

/// One peripheral manager of a client, on the daemon: a `PeripheralService` on the device (its
/// services in the device's one database, its own advertising set, requests for its own
/// attributes only), its calls from messages and its events as messages. Loop-confined.
///
/// Updates keep the client's back-pressure: the client's inbox holds the budget, and every
/// update that leaves this service's inbox (sent or dropped) is returned to it as
/// `updatesHandedOver`. The service's own inbox has the same budget and never holds more than
/// the client's, so it never refuses one.
///
/// A session opened with a restore identifier outlives its client (``detach()``): its services
/// stay in the database, its advertising goes on, its centrals stay connected and subscribed.
/// Requests that need the app are answered with Unlikely Error meanwhile (stored values are the
/// database's to answer, as always), and a later session with the same key takes it over
/// (``attach(id:send:)``) with a `restorePeripheralState` of what it has.
final class PeripheralSession: PeripheralServiceEvents, KeptSession, ChannelSession, @unchecked Sendable {
    private(set) var id: UInt32
    /// Channels centrals opened to its PSMs, relayed to its client.
    private(set) lazy var channels = SessionChannels(ledger: channelLedger) { [weakSelf = WeakHandle(self)] make in weakSelf.object?.emit(make) }
    private let channelLedger: DaemonChannelLedger
    /// Its client's pairing agent, when it has one.
    var pairing: SessionPairingAgent?
    let restoreIdentifier: String?
    private let service = PeripheralService()
    /// Where messages go; nil while no client holds the session.
    private var sink: ((DaemonMessage) -> Void)?
    /// While kept: hears the events an app would be relaunched for (`--on-event`).
    var wake: ((DaemonRestoration.Event) -> Void)?

    // What the session has now, for `restorePeripheralState`.
    /// Published services, by the client's key.
    private var services: [UInt32: DaemonRestoredLocalService] = [:]
    /// Services handed to the role service and not answered yet (it answers before returning).
    private var publishing: [UInt32: (includedKeys: [UInt32], service: GATTService)] = [:]
    /// What the last `startAdvertising` asked for, and what is advertised now.
    private var askedAdvertisement: DaemonAdvertisement?
    private var advertisement: DaemonAdvertisement?
    /// Connected centrals: address, ATT_MTU, value handles subscribed to.
    private var centrals: [UInt32: (peer: LEAddress, mtu: UInt16, subscribed: Set<ATTHandle>)] = [:]
    /// The PSMs its client published.
    private var publishedPSMs: Set<UInt16> = []
    /// Updates the client handed over whose slots have not come back.
    private var inFlight = 0
    /// Slots of an earlier client's updates still out: not returned to the next client (its
    /// budget starts full).
    private var owed = 0

    init(id: UInt32, restoreIdentifier: String? = nil, channelLedger: DaemonChannelLedger = DaemonChannelLedger(), device: HostDevice,
         send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        self.channelLedger = channelLedger
        self.restoreIdentifier = restoreIdentifier
        sink = send
        service.events = self
        service.updatesReleased = { [weakSelf = WeakHandle(self)] count in weakSelf.object?.released(count) }
        service.deviceDidStart(device)
        send(.state(session: id, state: ManagerState.poweredOn, reason: nil))
    }

    /// The session is over: the service leaves the device, and with it its services (they leave
    /// the database), its advertising set, its links and its subscribers.
    func end() {
        clientLeft()
        sink = nil
        wake = nil
        service.events = nil
        service.updatesReleased = nil
        // Requests the client can no longer answer are refused now, whoever still holds the
        // service (its responders also answer when freed), never left to the centrals' 30 s ATT
        // timeout, which would end their links for every session.
        service.answerPendingRequests(with: .unlikelyError)
        // Removing the client stops its advertising set and takes its services out of the database.
        service.device?.removeClient(service)
        service.deviceDidStop()
    }

    /// Its client went: everything stays (services, advertising, centrals and their
    /// subscriptions); the requests it left unanswered are refused now.
    func detach() {
        clientLeft()
        sink = nil
        owed += inFlight
        inFlight = 0
        service.answerPendingRequests(with: .unlikelyError)
    }

    /// A new client's session `id` takes the session over: `restorePeripheralState`, then the
    /// state.
    func attach(id: UInt32, send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        sink = send
        wake = nil
        let restored = services.values.sorted { $0.handles.range.lowerBound < $1.handles.range.lowerBound }
        let connected = centrals.sorted { $0.key < $1.key }.map { central, record in
            DaemonRestoredCentral(central: central, peer: record.peer, mtu: record.mtu, subscribed: record.subscribed.sorted())
        }
        send(.restorePeripheralState(session: id, services: restored, advertisement: advertisement, centrals: connected))
        send(.state(session: id, state: service.isOn ? ManagerState.poweredOn : ManagerState.poweredOff, reason: nil))
    }

    /// Its client went: its PSMs are unpublished (they were its process's), its channels
    /// close (at the peer too), and its pairing prompts are answered no.
    private func clientLeft() {
        for psm in publishedPSMs { service.unpublishChannel(psm) { _ in } }
        publishedPSMs = []
        channels.closeAll()
        pairing?.cancelAll()
        pairing = nil
        service.pairingAgent = nil
    }

    /// Sends an event of the session, if a client holds it.
    private func emit(_ make: (UInt32) -> DaemonMessage) {
        guard let sink else { return }
        sink(make(id))
    }

    /// Slots came back: those of an earlier client's updates are kept, the rest go to the client.
    private func released(_ count: Int) {
        let paid = min(owed, count)
        owed -= paid
        let mine = count - paid
        guard mine > 0 else { return }
        inFlight = max(0, inFlight - mine)
        emit { .updatesHandedOver(session: $0, count: UInt32(clamping: mine)) }
    }

    func handle(_ message: DaemonMessage) {
        switch message {
        case .publish(_, let key, let includedKeys, let definition):
            var kept = definition
            kept.includedServices = []
            publishing[key] = (includedKeys, kept)
            service.publish(definition, key: Int(key), includedKeys: includedKeys.map { Int($0) })
            publishing[key] = nil
        case .unpublish(_, let key):
            service.unpublish(Int(key))
        case .unpublishAll:
            service.unpublishAll()
        case .startAdvertising(_, let advertisement):
            askedAdvertisement = advertisement
            service.startAdvertising(name: advertisement.name, serviceUUIDs: advertisement.serviceUUIDs,
                                     manufacturerData: advertisement.manufacturerData,
                                     raw: advertisement.raw.map { ($0.advertisement, $0.scanResponse) })
        case .stopAdvertising:
            advertisement = nil
            service.stopAdvertising()
        case .setLatency(_, let central, let latency):
            let level: PeripheralConnectionLatency = switch latency {
            case 0: .low
            case 1: .medium
            default: .high
            }
            service.setDesiredConnectionLatency(level, for: Int(central))
        case .answer(_, let request, let error, let value):
            service.answer(Int(request), error: error.map { ATTErrorCode($0) }, value: value)
        case .update(_, let handle, let value, let centrals):
            let (accepted, needsDrain) = service.acceptUpdate(PeripheralUpdate(handle: handle, value: Data(value),
                                                                               centrals: centrals?.map { Int($0) }))
            // Never refused while the client keeps its budget; a client that does not is
            // given the slot back (the value is dropped).
            if accepted { inFlight += 1 } else { emit { .updatesHandedOver(session: $0, count: 1) } }
            if needsDrain { service.drainInbox() }
        case .publishChannel(_, let request, let psm, let requiresEncryption):
            service.publishChannel(psm: psm, requiresEncryption: requiresEncryption) { [weakSelf = WeakHandle(self)] result in
                guard let self = weakSelf.object else { return }
                if case .success(let published) = result { self.publishedPSMs.insert(published) }
                self.emit { .channelPublished(session: $0, request: request, result: result.mapError(DaemonChannelPublishError.init)) }
            }
        case .unpublishChannel(_, let request, let psm):
            service.unpublishChannel(psm) { [weakSelf = WeakHandle(self)] wasPublished in
                guard let self = weakSelf.object else { return }
                self.publishedPSMs.remove(psm)
                self.emit { .channelUnpublished(session: $0, request: request, wasPublished: wasPublished) }
            }
        default:
            if channels.handle(message) { return }
            _ = handlePairing(message, emit: { [weakSelf = WeakHandle(self)] make in
                guard let self = weakSelf.object, self.sink != nil else { return false }
                self.emit(make)
                return true
            }, install: { service.pairingAgent = $0 })
        }
    }

    // MARK: - The role's events, as messages

    func peripheral(_ service: any PeripheralRole, centralConnected central: Int, peer: LEAddress, mtu: Int) {
        let wireCentral = UInt32(truncatingIfNeeded: central)
        centrals[wireCentral] = (peer, UInt16(clamping: mtu), [])
        emit { .centralConnected(session: $0, central: wireCentral, peer: peer, mtu: UInt16(clamping: mtu)) }
    }

    func peripheral(_ service: any PeripheralRole, central: Int, mtuChanged mtu: Int) {
        let wireCentral = UInt32(truncatingIfNeeded: central)
        centrals[wireCentral]?.mtu = UInt16(clamping: mtu)
        emit { .centralMTU(session: $0, central: wireCentral, mtu: UInt16(clamping: mtu)) }
    }

    func peripheral(_ service: any PeripheralRole, centralDisconnected central: Int, abandonedRequests: [Int]) {
        let wireCentral = UInt32(truncatingIfNeeded: central)
        centrals[wireCentral] = nil
        emit { .centralDisconnected(session: $0, central: wireCentral, abandonedRequests: abandonedRequests.map { UInt32(truncatingIfNeeded: $0) }) }
    }

    func peripheral(_ service: any PeripheralRole, readRequest request: Int, central: Int, handle: ATTHandle, offset: Int) {
        guard sink != nil else {
            // No app to ask: refused at once (a central left waiting would lose its link to
            // the ATT timeout), and the registered command hears of it.
            service.answer(request, error: .unlikelyError, value: nil)
            wake?(.read)
            return
        }
        emit { .readRequest(session: $0, request: UInt32(truncatingIfNeeded: request), central: UInt32(truncatingIfNeeded: central),
                            handle: handle, offset: UInt16(clamping: offset)) }
    }

    func peripheral(_ service: any PeripheralRole, writeRequest request: Int, writes: [PeripheralWrite]) {
        guard sink != nil else {
            // A Write Command is answered already (its value is lost); a request is refused.
            if request >= 0 { service.answer(request, error: .unlikelyError, value: nil) }
            wake?(.write)
            return
        }
        let wire = writes.map {
            DaemonWrite(central: UInt32(truncatingIfNeeded: $0.central), handle: $0.handle, offset: UInt16(clamping: $0.offset),
                        value: $0.value)
        }
        emit { .writeRequest(session: $0, request: request >= 0 ? UInt32(truncatingIfNeeded: request) : nil, writes: wire) }
    }

    func peripheral(_ service: any PeripheralRole, central: Int, subscribedTo handle: ATTHandle) {
        let wireCentral = UInt32(truncatingIfNeeded: central)
        centrals[wireCentral]?.subscribed.insert(handle)
        if sink == nil { wake?(.subscribed) }
        emit { .subscribed(session: $0, central: wireCentral, handle: handle) }
    }

    func peripheral(_ service: any PeripheralRole, central: Int, unsubscribedFrom handle: ATTHandle) {
        let wireCentral = UInt32(truncatingIfNeeded: central)
        centrals[wireCentral]?.subscribed.remove(handle)
        if sink == nil { wake?(.unsubscribed) }
        emit { .unsubscribed(session: $0, central: wireCentral, handle: handle) }
    }

    /// The client's inbox decides readiness from the returned slots (`updatesHandedOver`).
    func peripheralReadyToUpdateSubscribers(_ service: any PeripheralRole) {}

    func peripheral(_ service: any PeripheralRole, didPublish key: Int, result: Result<GATTServiceHandles, PeripheralPublishError>) {
        let wireKey = UInt32(truncatingIfNeeded: key)
        if case .success(let handles) = result, let asked = publishing[wireKey] {
            services[wireKey] = DaemonRestoredLocalService(key: wireKey, includedKeys: asked.includedKeys, service: asked.service,
                                                           handles: handles)
        }
        let wire: Result<GATTServiceHandles, DaemonPublishError> = result.mapError {
            switch $0 {
            case .alreadyPublished: .alreadyPublished
            case .includedServiceNotPublished(let included): .includedServiceNotPublished(key: UInt32(truncatingIfNeeded: included))
            case .database(let error): .database(error)
            }
        }
        emit { .published(session: $0, key: wireKey, result: wire) }
    }

    func peripheral(_ service: any PeripheralRole, didUnpublish key: Int, error: PeripheralUnpublishError?) {
        let wireKey = UInt32(truncatingIfNeeded: key)
        if error == nil { services[wireKey] = nil }
        let wire: DaemonUnpublishError? = error.map {
            switch $0 {
            case .notPublished: .notPublished
            case .included(let includer): .included(byKey: UInt32(truncatingIfNeeded: includer))
            case .database(let error): .database(error)
            }
        }
        emit { .unpublished(session: $0, key: wireKey, error: wire) }
    }

    func peripheral(_ service: any PeripheralRole, didStartAdvertising error: PeripheralAdvertisingError?, isOn: Bool) {
        if error == nil && isOn { advertisement = askedAdvertisement }
        let wire: DaemonAdvertisingError? = error.map {
            switch $0 {
            case .alreadyAdvertising: .alreadyAdvertising
            case .manufacturerDataDoesNotFit(let count): .manufacturerDataDoesNotFit(byteCount: UInt32(clamping: count))
            case .refused(let failure): .refused("\(failure)")
            }
        }
        emit { .advertisingStarted(session: $0, error: wire, isOn: isOn) }
    }

    func peripheralAdvertisingStopped(_ service: any PeripheralRole) {
        advertisement = nil
        emit { .advertisingStopped(session: $0) }
    }

    func peripheral(_ service: any PeripheralRole, deviceDidClose error: HCITransportError?) {
        advertisement = nil
        centrals = [:]
        services = [:]
        emit { .state(session: $0, state: ManagerState.poweredOff, reason: error.map { "\($0)" }) }
    }

    /// The daemon's controller reset itself: its centrals were reported gone, and the session's
    /// services and advertising are gone (the client adds them again after `.poweredOn`).
    func peripheralDeviceWillReset(_ service: any PeripheralRole) {
        advertisement = nil
        centrals = [:]
        services = [:]
        emit { .state(session: $0, state: ManagerState.resetting, reason: "the controller reset itself; corebluetoothd is resetting it") }
    }

    func peripheralDeviceDidReset(_ service: any PeripheralRole) {
        emit { .state(session: $0, state: ManagerState.poweredOn, reason: nil) }
    }

    /// A central opened a channel to one of the session's PSMs: the client hears of it (a kept
    /// session has nobody to take it: it closes).
    func peripheral(_ service: any PeripheralRole, central: Int, didOpen channel: RoleChannel) {
        guard sink != nil else { return channel.close() }
        channels.add(channel) { id in
            emit { .channelIncoming(session: $0, channel: id, central: UInt32(truncatingIfNeeded: central), peer: channel.peer,
                                    psm: channel.psm) }
        }
    }
}
