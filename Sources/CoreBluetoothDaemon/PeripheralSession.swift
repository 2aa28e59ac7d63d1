import ATT
import AssignedNumbers
import DaemonProtocol
import Foundation // `Data`, as the role service takes an update's value
import GATT
import HCI
import HCITransport
import HostDevice
import RoleServices

/// One peripheral manager of a client, on the daemon: a `PeripheralService` on the device (its
/// services in the device's one database, its own advertising set, requests for its own
/// attributes only), its calls from messages and its events as messages. Loop-confined.
///
/// Updates keep the client's back-pressure: the client's inbox holds the budget, and every
/// update that leaves this service's inbox (sent or dropped) is returned to it as
/// `updatesHandedOver`. The service's own inbox has the same budget and never holds more than
/// the client's, so it never refuses one.
final class PeripheralSession: PeripheralServiceEvents, @unchecked Sendable {
    let id: UInt32
    private let service = PeripheralService()
    private let send: (DaemonMessage) -> Void

    init(id: UInt32, device: HostDevice, send: @escaping (DaemonMessage) -> Void) {
        self.id = id
        self.send = send
        service.events = self
        service.updatesReleased = { [id, send] count in send(.updatesHandedOver(session: id, count: UInt32(clamping: count))) }
        service.deviceDidStart(device)
        send(.state(session: id, state: ManagerState.poweredOn, reason: nil))
    }

    /// The session is over: the service leaves the device, and with it its services (they leave
    /// the database), its advertising set, its links and its subscribers.
    func end() {
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

    func handle(_ message: DaemonMessage) {
        switch message {
        case .publish(_, let key, let includedKeys, let definition):
            service.publish(definition, key: Int(key), includedKeys: includedKeys.map { Int($0) })
        case .unpublish(_, let key):
            service.unpublish(Int(key))
        case .unpublishAll:
            service.unpublishAll()
        case .startAdvertising(_, let advertisement):
            service.startAdvertising(name: advertisement.name, serviceUUIDs: advertisement.serviceUUIDs,
                                     manufacturerData: advertisement.manufacturerData,
                                     raw: advertisement.raw.map { ($0.advertisement, $0.scanResponse) })
        case .stopAdvertising:
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
            if !accepted { send(.updatesHandedOver(session: id, count: 1)) }
            if needsDrain { service.drainInbox() }
        default:
            break
        }
    }

    // MARK: - The role's events, as messages

    func peripheral(_ service: any PeripheralRole, centralConnected central: Int, peer: LEAddress, mtu: Int) {
        send(.centralConnected(session: id, central: UInt32(truncatingIfNeeded: central), peer: peer, mtu: UInt16(clamping: mtu)))
    }

    func peripheral(_ service: any PeripheralRole, central: Int, mtuChanged mtu: Int) {
        send(.centralMTU(session: id, central: UInt32(truncatingIfNeeded: central), mtu: UInt16(clamping: mtu)))
    }

    func peripheral(_ service: any PeripheralRole, centralDisconnected central: Int, abandonedRequests: [Int]) {
        send(.centralDisconnected(session: id, central: UInt32(truncatingIfNeeded: central),
                                  abandonedRequests: abandonedRequests.map { UInt32(truncatingIfNeeded: $0) }))
    }

    func peripheral(_ service: any PeripheralRole, readRequest request: Int, central: Int, handle: ATTHandle, offset: Int) {
        send(.readRequest(session: id, request: UInt32(truncatingIfNeeded: request), central: UInt32(truncatingIfNeeded: central),
                          handle: handle, offset: UInt16(clamping: offset)))
    }

    func peripheral(_ service: any PeripheralRole, writeRequest request: Int, writes: [PeripheralWrite]) {
        let wire = writes.map {
            DaemonWrite(central: UInt32(truncatingIfNeeded: $0.central), handle: $0.handle, offset: UInt16(clamping: $0.offset),
                        value: $0.value)
        }
        send(.writeRequest(session: id, request: request >= 0 ? UInt32(truncatingIfNeeded: request) : nil, writes: wire))
    }

    func peripheral(_ service: any PeripheralRole, central: Int, subscribedTo handle: ATTHandle) {
        send(.subscribed(session: id, central: UInt32(truncatingIfNeeded: central), handle: handle))
    }

    func peripheral(_ service: any PeripheralRole, central: Int, unsubscribedFrom handle: ATTHandle) {
        send(.unsubscribed(session: id, central: UInt32(truncatingIfNeeded: central), handle: handle))
    }

    /// The client's inbox decides readiness from the returned slots (`updatesHandedOver`).
    func peripheralReadyToUpdateSubscribers(_ service: any PeripheralRole) {}

    func peripheral(_ service: any PeripheralRole, didPublish key: Int, result: Result<GATTServiceHandles, PeripheralPublishError>) {
        let wire: Result<GATTServiceHandles, DaemonPublishError> = result.mapError {
            switch $0 {
            case .alreadyPublished: .alreadyPublished
            case .includedServiceNotPublished(let included): .includedServiceNotPublished(key: UInt32(truncatingIfNeeded: included))
            case .database(let error): .database(error)
            }
        }
        send(.published(session: id, key: UInt32(truncatingIfNeeded: key), result: wire))
    }

    func peripheral(_ service: any PeripheralRole, didUnpublish key: Int, error: PeripheralUnpublishError?) {
        let wire: DaemonUnpublishError? = error.map {
            switch $0 {
            case .notPublished: .notPublished
            case .included(let includer): .included(byKey: UInt32(truncatingIfNeeded: includer))
            case .database(let error): .database(error)
            }
        }
        send(.unpublished(session: id, key: UInt32(truncatingIfNeeded: key), error: wire))
    }

    func peripheral(_ service: any PeripheralRole, didStartAdvertising error: PeripheralAdvertisingError?, isOn: Bool) {
        let wire: DaemonAdvertisingError? = error.map {
            switch $0 {
            case .alreadyAdvertising: .alreadyAdvertising
            case .manufacturerDataDoesNotFit(let count): .manufacturerDataDoesNotFit(byteCount: UInt32(clamping: count))
            case .refused(let failure): .refused("\(failure)")
            }
        }
        send(.advertisingStarted(session: id, error: wire, isOn: isOn))
    }

    func peripheralAdvertisingStopped(_ service: any PeripheralRole) { send(.advertisingStopped(session: id)) }

    func peripheral(_ service: any PeripheralRole, deviceDidClose error: HCITransportError?) {
        send(.state(session: id, state: ManagerState.poweredOff, reason: error.map { "\($0)" }))
    }

    /// Channels cross the daemon in a later version of the protocol (docs/daemon.md).
    func peripheral(_ service: any PeripheralRole, central: Int, didOpen channel: RoleChannel) { channel.close() }
}
