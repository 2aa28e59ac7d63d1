import ATT
import AssignedNumbers
import Foundation
import GATT
import HostStack
import Scheduling

/// One connection of a central manager to a peripheral, on the device's loop: the ATT bearer
/// (the device's own GATT server answers on it, the GATT client drives it), the connection
/// setup iOS does (ATT MTU, the peripheral's name, Service Changed), and the queue of writes
/// without response that feeds the link as fast as its buffers drain.
///
/// Loop-confined.
final class PeripheralLink: ATTBearerListener, @unchecked Sendable {
    let connection: LEConnection
    @exclusivity(unchecked) private weak var engine: CentralEngine?
    @exclusivity(unchecked) weak var peripheral: CBPeripheral?
    let bearer: ATTBearer
    let client: GATTClient
    /// Set once the app was told of the connection.
    @exclusivity(unchecked) private(set) var isReady = false
    /// The app disconnected (or released the peripheral).
    @exclusivity(unchecked) var closedByApp = false
    /// Whether the app hears `didDisconnectPeripheral` when `closedByApp`.
    @exclusivity(unchecked) var notifyOnClose = true
    /// Set when this side ended the link for a reason the app should hear (an ATT timeout).
    @exclusivity(unchecked) var closeError: CBError?
    @exclusivity(unchecked) private var readyTimer: TimerHandle?
    @exclusivity(unchecked) private var writes = RingBuffer<(handle: ATTHandle, value: [UInt8])>(capacity: 64)
    @exclusivity(unchecked) private(set) var isClosed = false

    /// How long the app waits for the ATT MTU exchange before hearing of the connection anyway.
    static let mtuExchangeGrace: Duration = .seconds(2)

    init(connection: LEConnection, engine: CentralEngine, peripheral: CBPeripheral) {
        self.connection = connection
        self.engine = engine
        self.peripheral = peripheral
        bearer = ATTBearer(channel: connection.l2cap.att, loop: engine.host.loop)
        bearer.log = StackLog.sink
        engine.localServer.attach(bearer)
        client = GATTClient(bearer: bearer)
        // Core Bluetooth queues whatever the app asks for.
        client.maximumQueuedProcedures = Int.max
        client.log = StackLog.sink
    }

    var loop: EventLoop { bearer.loop }

    func start() {
        bearer.addListener(self)
        client.onReadyToSendWriteWithoutResponse = { [weak self] in self?.drainWrites() }
        client.onServiceChanged = { [weak self] range in
            guard let self, let peripheral else { return }
            peripheral.linkServicesChanged(range)
        }
        client.onClose = { [weak self] error in
            // A peer that leaves a request unanswered for 30 s has a dead ATT bearer; the link
            // is of no use after that (Vol 3 Part F §3.3.3).
            guard let self, error == .timeout else { return }
            closeError = CBError(.connectionTimeout, description: "The peripheral did not answer within 30 seconds.")
            engine?.disconnect(self)
        }
        readyTimer = loop.schedule(after: Self.mtuExchangeGrace) { [weak self] in self?.becomeReady() }
        client.exchangeMTU { [weak self] result in
            if case .failure(let error) = result {
                // The link went down before it was ready: the app hears didFailToConnect.
                guard error != .disconnected else { return }
                StackLog.log("ATT MTU exchange failed: \(error)")
            }
            self?.becomeReady()
        }
    }

    func attBearerMTUDidChange(to mtu: Int) { peripheral?.linkMTUChanged(mtu) }

    private func becomeReady() {
        guard !isReady, !isClosed else { return }
        isReady = true
        readyTimer?.cancel()
        readyTimer = nil
        peripheral?.linkMTUChanged(bearer.mtu)
        // What iOS does on every connection, queued before anything the app asks: learn the
        // peripheral's GAP name, and ask for Service Changed indications.
        readDeviceName()
        subscribeToServiceChanged()
        engine?.linkIsReady(self)
    }

    private func readDeviceName() {
        client.readValues(ofType: .deviceName) { [weak self] result in
            guard let self, case .success(let values) = result, let first = values.first,
                  let name = String(validating: first.value, as: UTF8.self), !name.isEmpty else { return }
            peripheral?.linkReadName(name)
        }
    }

    private func subscribeToServiceChanged() {
        client.discoverPrimaryServices(uuid: .genericAttributeService) { [weak self] result in
            guard let self, case .success(let services) = result, let service = services.first else { return }
            client.discoverCharacteristics(of: service, uuid: .serviceChanged) { [weak self] result in
                guard let self, case .success(let found) = result, let characteristic = found.first,
                      characteristic.properties.contains(.indicate) else { return }
                client.subscribe(to: characteristic, onValue: { _ in }) { result in
                    if case .failure(let error) = result { StackLog.log("Service Changed subscription failed: \(error)") }
                }
            }
        }
    }

    // MARK: Writes without response

    /// Queues a write without response; it goes out as soon as the link's buffers take it.
    func enqueueWrite(_ value: [UInt8], to handle: ATTHandle) {
        writes.append((handle, value))
        drainWrites()
    }

    private func drainWrites() {
        var sent = 0
        let limit = ATTMTU.maximumWriteValueLength(mtu: bearer.mtu)
        while let next = writes.first {
            if next.value.count > limit {
                // Longer than one Write Command can carry: nothing can send it.
                StackLog.log("write without response of \(next.value.count) bytes dropped: at most \(limit) fit")
            } else if !client.writeWithoutResponse(next.value, to: next.handle) {
                break
            }
            _ = writes.popFirst()
            sent += 1
        }
        if sent > 0 { peripheral?.linkReturnedWriteBudget(sent) }
    }

    /// The connection is gone: nothing more is sent or delivered.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        readyTimer?.cancel()
        readyTimer = nil
        writes.removeAll()
        peripheral?.linkClosed()
    }
}
