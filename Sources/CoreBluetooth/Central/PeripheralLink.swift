import ATT
import AssignedNumbers
import Foundation
import GATT
import HostDevice
import HostStack
import Scheduling

/// One connection of a central manager to a peripheral, on the device's loop: the device's
/// connection (its ATT bearer, GATT client, and the device's GATT server answering on it),
/// what iOS does on each connection (the peripheral's name, Service Changed), and the queue of
/// writes without response that feeds the link as fast as its buffers drain.
///
/// Loop-confined.
final class PeripheralLink: @unchecked Sendable {
    let connection: DeviceConnection
    @exclusivity(unchecked) weak var peripheral: CBPeripheral?
    /// The app disconnected (or released the peripheral).
    @exclusivity(unchecked) var closedByApp = false
    /// Whether the app hears `didDisconnectPeripheral` when `closedByApp`.
    @exclusivity(unchecked) var notifyOnClose = true
    @exclusivity(unchecked) private var writes = RingBuffer<(handle: ATTHandle, value: [UInt8])>(capacity: 64)
    @exclusivity(unchecked) private(set) var isClosed = false

    init(connection: DeviceConnection, peripheral: CBPeripheral) {
        self.connection = connection
        self.peripheral = peripheral
    }

    var bearer: ATTBearer { connection.bearer }
    var client: GATTClient { connection.client }
    var loop: EventLoop { connection.loop }

    /// The link is ready (the device exchanged the ATT MTU): what iOS does on every
    /// connection, queued before anything the app asks: learn the peripheral's GAP name, and
    /// ask for Service Changed indications.
    func start() {
        let previousMTU = bearer.onMTUChanged
        bearer.onMTUChanged = { [weak self] mtu in
            previousMTU?(mtu)
            self?.peripheral?.linkMTUChanged(mtu)
        }
        client.onReadyToSendWriteWithoutResponse = { [weak self] in self?.drainWrites() }
        client.onServiceChanged = { [weak self] range in
            guard let self, let peripheral else { return }
            peripheral.linkServicesChanged(range)
        }
        peripheral?.linkMTUChanged(bearer.mtu)
        readDeviceName()
        subscribeToServiceChanged()
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
        writes.removeAll()
        peripheral?.linkClosed()
    }
}
