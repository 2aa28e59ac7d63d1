import CoreBluetooth
import CoreBluetoothAsync
import ExampleApps
import Foundation

/// The book's EchoServer (ch. 12) in the async style: the same service (180C) and
/// characteristics — 2A56 (read + notify: the echo) and 2A57 (write) — so the book's
/// `EchoClient` talks to it unchanged, but one function instead of a delegate class. Each write
/// comes back as a notification; `updateValue` waits for room instead of dropping the echo.
public struct AsyncEchoServer: Sendable {
    public let manager: CBPeripheralManager
    public let log: ExampleLog

    public init(manager: CBPeripheralManager, log: ExampleLog = ExampleLog()) {
        self.manager = manager
        self.log = log
    }

    /// Publishes, advertises as "EchoServer" and echoes until the task is cancelled (or the
    /// manager powers off).
    public func run() async throws {
        for await state in manager.stateUpdates where state != .unknown && state != .resetting {
            guard state == .poweredOn else { throw CBError(.unknown) }
            break
        }
        let echo = CBMutableCharacteristic(type: EchoServerPeripheral.readCharacteristicUuid, properties: [.read, .notify],
                                           value: nil, permissions: [.readable])
        let inbox = CBMutableCharacteristic(type: EchoServerPeripheral.writeCharacteristicUuid, properties: [.write],
                                            value: nil, permissions: [.writeable])
        let service = CBMutableService(type: EchoServerPeripheral.serviceUuid, primary: true)
        service.characteristics = [echo, inbox]
        try await manager.add(service)
        var requests = manager.requests.makeAsyncIterator()
        try await manager.startAdvertising([CBAdvertisementDataLocalNameKey: EchoServerPeripheral.advertisedName,
                                            CBAdvertisementDataServiceUUIDsKey: [EchoServerPeripheral.serviceUuid]])
        log("advertising as \(EchoServerPeripheral.advertisedName)")
        var last = Data()
        while let request = await requests.next() {
            switch request {
            case .read(let read):
                guard read.offset <= last.count else {
                    manager.respond(to: read, withResult: .invalidOffset)
                    continue
                }
                read.value = last.subdata(in: read.offset ..< last.count)
                manager.respond(to: read, withResult: .success)
            case .write(let writes):
                manager.respond(to: writes[0], withResult: .success)
                for value in writes.compactMap(\.value) {
                    last = value
                    log("echoing \(value.count) bytes: \(String(decoding: value, as: UTF8.self).debugDescription)")
                    try await manager.updateValue(value, for: echo, onSubscribedCentrals: nil)
                }
            case .subscribe, .unsubscribe:
                break
            }
        }
    }
}
