import CoreBluetooth
import Foundation

/// The book's ch. 10 streaming peripheral (book-apps.md §1.14): one characteristic 2A56 in 180C
/// (read, write, notify). Every write is answered and followed by the notification "ready",
/// the central's cue to send its next 20-byte chunk. The chunks are also put together here: a
/// message ends at its NUL byte.
public final class FlowControlPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisingName = "MyDevice"
    public static let serviceUuid = CBUUID(string: "180C")
    public static let characteristicUuid = CBUUID(string: "2A56")
    public static let flowControlString = "ready"

    public let log: ExampleLog
    private let characteristic = CBMutableCharacteristic(type: characteristicUuid, properties: [.read, .write, .notify],
                                                         value: nil, permissions: [.readable, .writeable])
    private struct State {
        var advertising = false
        var chunks: [Data] = []
        var partial = Data()
        var messages: [String] = []
        var pendingReady: [CBCentral] = []
    }
    private let state = Protected(State())
    private(set) public var peripheralManager: CBPeripheralManager!

    public var isAdvertising: Bool { state.value.advertising }
    /// Every write's bytes, in order.
    public var chunks: [Data] { state.value.chunks }
    /// The complete messages (up to their NUL), in order.
    public var messages: [String] { state.value.messages }

    public init(queue: DispatchQueue? = nil, position: [Double]? = nil, log: ExampleLog = ExampleLog()) {
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error { return log("Problem adding service: \(error.localizedDescription)") }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisingName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        state.update { $0.advertising = true }
        log("advertising started")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        guard let first = requests.first else { return }
        peripheral.respond(to: first, withResult: .success)
        for request in requests {
            let value = request.value ?? Data()
            let finished = state.update { state -> [String] in
                state.chunks.append(value)
                var done: [String] = []
                for byte in value {
                    if byte == 0 {
                        done.append(String(decoding: state.partial, as: UTF8.self))
                        state.partial = Data()
                    } else {
                        state.partial.append(byte)
                    }
                }
                state.messages += done
                return done
            }
            log("received \(value.count) bytes: \(hexString(value))")
            for message in finished { log("message: \(message)") }
            sendReady(to: request.central)
        }
    }

    private func sendReady(to central: CBCentral) {
        let sent = peripheralManager.updateValue(Data(Self.flowControlString.utf8), for: characteristic,
                                                 onSubscribedCentrals: [central])
        if !sent { state.update { $0.pendingReady.append(central) } }
    }

    public func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        let pending = state.update { state -> [CBCentral] in
            defer { state.pendingReady = [] }
            return state.pendingReady
        }
        pending.forEach(sendReady)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        answerRead(request, with: Data(Self.flowControlString.utf8), on: peripheral)
    }
}
