import CoreBluetooth
import Foundation

/// The book's ch. 7 Read and ch. 9 Notifications peripheral (book-apps.md §1.9, §1.13): service
/// 180C, characteristic 2A56 (read + notify) holding random text (0–18 letters and digits),
/// replaced every 5 seconds and notified to the subscribed centrals. Fixed book bugs: reads
/// answer `offset..<count`; unsubscribing forgets the central; an update refused because the
/// transmit queue is full is sent again from `peripheralManagerIsReady(toUpdateSubscribers:)`.
public final class RandomTextPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    public static let advertisingName = "MyDevice"
    public static let serviceUuid = CBUUID(string: "180C")
    public static let characteristicUuid = CBUUID(string: "2A56")
    static let characters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    static let characteristicLength = 20

    public let log: ExampleLog
    private let queue: DispatchQueue?
    private let timers: ExampleTimers
    private let interval: Double
    private let characteristic = CBMutableCharacteristic(type: characteristicUuid, properties: [.read, .notify],
                                                         value: nil, permissions: [.readable, .writeable])
    private struct State {
        var value = Data()
        var subscribed: [CBCentral] = []
        var pendingUpdate = false
        var timer: ExampleTimer?
        var advertising = false
    }
    private let state = Protected(State())
    private(set) public var peripheralManager: CBPeripheralManager!

    /// The text centrals read now.
    public var currentText: String { String(decoding: state.value.value, as: UTF8.self) }
    public var isAdvertising: Bool { state.value.advertising }
    public var subscriberCount: Int { state.value.subscribed.count }

    public init(queue: DispatchQueue? = nil, position: [Double]? = nil, timers: ExampleTimers = DispatchTimers(),
                interval: Double = 5, log: ExampleLog = ExampleLog()) {
        self.queue = queue
        self.timers = timers
        self.interval = interval
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue, options: ManagerOptions.position(position))
    }

    /// 0–18 random letters and digits (the book's `arc4random_uniform(20 - 1)` length).
    static func randomString() -> String {
        let length = Int.random(in: 0..<(characteristicLength - 1))
        return String((0..<length).map { _ in characters.randomElement()! })
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else {
            state.update { $0.timer?.cancel(); $0.timer = nil }
            return log("Bluetooth not on")
        }
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
        log("advertising started")
        setRandomCharacteristicValue()
        let timer = timers.every(interval, on: queue) { [weak self] in self?.setRandomCharacteristicValue() }
        state.update {
            $0.advertising = true
            $0.timer?.cancel()
            $0.timer = timer
        }
    }

    /// A new random text, notified to the subscribers.
    public func setRandomCharacteristicValue() {
        let text = Self.randomString()
        let value = Data(text.utf8)
        state.update { $0.value = value }
        log("writing \(text) to characteristic")
        sendUpdate()
    }

    private func sendUpdate() {
        let (value, centrals) = state.update { ($0.value, $0.subscribed) }
        guard !centrals.isEmpty else { return }
        let sent = peripheralManager.updateValue(value, for: characteristic, onSubscribedCentrals: centrals)
        state.update { $0.pendingUpdate = !sent }
    }

    public func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) {
        if state.value.pendingUpdate { sendUpdate() }
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        guard request.characteristic.uuid == Self.characteristicUuid else {
            return peripheral.respond(to: request, withResult: .attributeNotFound)
        }
        answerRead(request, with: state.value.value, on: peripheral)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didSubscribeTo characteristic: CBCharacteristic) {
        state.update { $0.subscribed.append(central) }
        log("subscribed")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral,
                                  didUnsubscribeFrom characteristic: CBCharacteristic) {
        state.update { $0.subscribed.removeAll { $0.identifier == central.identifier } }
        log("unsubscribed")
    }

    public func stop() {
        state.update { $0.timer?.cancel(); $0.timer = nil; $0.advertising = false }
        peripheralManager.stopAdvertising()
    }
}
