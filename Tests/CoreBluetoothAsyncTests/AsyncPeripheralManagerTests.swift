@testable import CoreBluetooth
import CoreBluetoothAsync
import Dispatch
import Foundation
import Synchronization
import Testing

/// A peripheral manager driven only through the async extension (no delegate), and a central
/// driven the same way, on a private wall-clock radio.
struct AsyncPeripheralFixture {
    static let service = CBUUID(string: "5A1E1001-0000-1000-8000-00805F9B34FB")
    static let readable = CBUUID(string: "5A1E1002-0000-1000-8000-00805F9B34FB")
    static let writable = CBUUID(string: "5A1E1003-0000-1000-8000-00805F9B34FB")
    static let notifying = CBUUID(string: "5A1E1004-0000-1000-8000-00805F9B34FB")

    let radio = CBVirtualRadio(clock: .realTime)
    let queue = DispatchQueue(label: "async peripheral manager")
    let manager: CBPeripheralManager
    let central: CBCentralManager
    let notifyingCharacteristic = CBMutableCharacteristic(type: notifying, properties: [.notify], value: nil, permissions: [])

    init() async {
        let (radio, queue) = (radio, queue)
        manager = CBVirtualRadio.withCurrent(radio) { CBPeripheralManager(delegate: nil, queue: queue) }
        central = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: nil, queue: DispatchQueue(label: "async central")) }
        for await state in manager.stateUpdates where state == .poweredOn { break }
    }

    func makeService() -> CBMutableService {
        let service = CBMutableService(type: Self.service, primary: true)
        service.characteristics = [
            CBMutableCharacteristic(type: Self.readable, properties: [.read], value: nil, permissions: [.readable]),
            CBMutableCharacteristic(type: Self.writable, properties: [.write], value: nil, permissions: [.writeable]),
            notifyingCharacteristic,
        ]
        return service
    }

    /// Publishes the service and advertises it as "AsyncServer".
    func publish() async throws {
        try await manager.add(makeService())
        try await manager.startAdvertising([CBAdvertisementDataLocalNameKey: "AsyncServer",
                                            CBAdvertisementDataServiceUUIDsKey: [Self.service]])
    }

    /// The central connected to the manager, with the service's characteristics discovered.
    func connect() async throws -> (CBPeripheral, [CBCharacteristic]) {
        for await state in central.stateUpdates where state == .poweredOn { break }
        var found: CBPeripheral?
        for await discovery in central.discoveries(withServices: [Self.service]) {
            found = discovery.peripheral
            break
        }
        let peripheral = try #require(found)
        try await central.connect(peripheral)
        let service = try #require(try await peripheral.services([Self.service]).first)
        return (peripheral, try await peripheral.characteristics(nil, for: service))
    }
}

@Suite(.timeLimit(.minutes(1)))
struct AsyncPeripheralManagerTests {
    @Test func addAdvertiseAndServeReadsWritesAndSubscriptions() async throws {
        let fixture = await AsyncPeripheralFixture()
        try await fixture.publish()
        #expect(fixture.manager.isAdvertising)

        let manager = fixture.manager
        let happenings = Happenings()
        let server = Task {
            var requests = manager.requests.makeAsyncIterator()
            happenings.append("serving")
            while let request = await requests.next() {
                switch request {
                case .read(let read):
                    read.value = Data("async read".utf8).subdata(in: read.offset ..< 10)
                    manager.respond(to: read, withResult: .success)
                case .write(let writes):
                    for write in writes { happenings.append("wrote \(String(decoding: write.value ?? Data(), as: UTF8.self))") }
                    manager.respond(to: writes[0], withResult: .success)
                case .subscribe(let central, let characteristic):
                    #expect(characteristic.uuid == AsyncPeripheralFixture.notifying)
                    #expect(central.maximumUpdateValueLength >= 20)
                    happenings.append("subscribed")
                case .unsubscribe:
                    happenings.append("unsubscribed")
                }
            }
        }
        await happenings.wait(for: "serving")

        let (peripheral, characteristics) = try await fixture.connect()
        #expect(try await peripheral.read(try characteristics.with(AsyncPeripheralFixture.readable)) == Data("async read".utf8))
        try await peripheral.write(Data("async write".utf8), to: try characteristics.with(AsyncPeripheralFixture.writable),
                                   type: .withResponse)
        #expect(happenings.all.filter { $0.hasPrefix("wrote") } == ["wrote async write"])

        let notifying = try characteristics.with(AsyncPeripheralFixture.notifying)
        let received = Task {
            var values: [Data] = []
            for try await value in peripheral.notifications(for: notifying) {
                values.append(value)
                if values.count == 2 { break }
            }
            return values
        }
        await happenings.wait(for: "subscribed")
        try await manager.updateValue(Data([1]), for: fixture.notifyingCharacteristic, onSubscribedCentrals: nil)
        try await manager.updateValue(Data([2]), for: fixture.notifyingCharacteristic, onSubscribedCentrals: nil)
        #expect(try await received.value == [Data([1]), Data([2])])
        await happenings.wait(for: "unsubscribed")
        server.cancel()
        _ = await server.result
    }

    @Test func updateValueWaitsForRoomInsteadOfDroppingValues() async throws {
        let fixture = await AsyncPeripheralFixture()
        try await fixture.publish()
        let (peripheral, characteristics) = try await fixture.connect()
        let count = 3000  // several times the manager's transmit queue
        var requests = fixture.manager.requests.makeAsyncIterator()
        let received = Task {
            var values: [UInt16] = []
            for try await value in peripheral.notifications(for: try characteristics.with(AsyncPeripheralFixture.notifying)) {
                values.append(UInt16(value[0]) | UInt16(value[1]) << 8)
                if values.count == count { break }
            }
            return values
        }
        guard case .subscribe = await requests.next() else {
            Issue.record("no subscription")
            return
        }
        for index in 0 ..< count {
            let value = Data([UInt8(index & 0xFF), UInt8(index >> 8)])
            try await fixture.manager.updateValue(value, for: fixture.notifyingCharacteristic, onSubscribedCentrals: nil)
        }
        #expect(try await received.value == (0 ..< count).map { UInt16($0) })
    }

    @Test func addAndStartAdvertisingThrowTheDelegatesErrors() async throws {
        let fixture = await AsyncPeripheralFixture()
        // A cached value on a writable characteristic: refused, as Apple's add(_:) refuses it.
        let service = CBMutableService(type: CBUUID(string: "1234"), primary: true)
        service.characteristics = [
            CBMutableCharacteristic(type: CBUUID(string: "2A00"), properties: [.read, .write], value: Data([1]),
                                    permissions: [.readable, .writeable]),
        ]
        let addError = await #expect(throws: CBError.self) { try await fixture.manager.add(service) }
        #expect(addError?.code == .invalidParameters)
        let advertisingError = await #expect(throws: CBError.self) {
            try await fixture.manager.startAdvertising([CBAdvertisementDataTxPowerLevelKey: 4])
        }
        #expect(advertisingError?.code == .invalidParameters)
        #expect(!fixture.manager.isAdvertising)
    }

    @Test func aCancelledAddLeavesTheServiceUnpublished() async throws {
        let fixture = await AsyncPeripheralFixture()
        let service = fixture.makeService()
        // The answer cannot arrive while the delegate queue is held: the cancellation wins.
        fixture.queue.suspend()
        let adding = Task { try await fixture.manager.add(service) }
        adding.cancel()
        fixture.queue.resume()
        await #expect(throws: CancellationError.self) { try await adding.value }
        // The same service adds again (it would be "already published" otherwise) once the
        // cancelled add's answer removed it.
        var published = false
        for _ in 0 ..< 100 where !published {
            do {
                try await fixture.manager.add(service)
                published = true
            } catch let error as CBError where error.code == .invalidParameters {
                await Task.yield()
            }
        }
        #expect(published)
    }

    @Test func aCancelledStartAdvertisingStopsTheAdvertising() async throws {
        let fixture = await AsyncPeripheralFixture()
        try await fixture.manager.add(fixture.makeService())
        // Cancelled before the answer can arrive (the delegate queue is held): stopped again,
        // or never started if the cancellation came before the call.
        fixture.queue.suspend()
        let starting = Task {
            try await fixture.manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Cancelled"])
        }
        starting.cancel()
        fixture.queue.resume()
        await #expect(throws: CancellationError.self) { try await starting.value }
        // The manager's loop is past the stop once a later add is answered.
        try await fixture.manager.add(CBMutableService(type: CBUUID(string: "5A1E10FF-0000-1000-8000-00805F9B34FB"), primary: true))
        #expect(!fixture.manager.isAdvertising)
    }

    @Test func aCancellationAfterTheAnswerUndoesNothing() async throws {
        let fixture = await AsyncPeripheralFixture()
        try await fixture.manager.add(fixture.makeService())
        let seen = Happenings()
        let token = fixture.manager.addEventTap(AdvertisingWatcher(seen))
        defer { fixture.manager.removeEventTap(token) }
        // The task runs on a queue the test holds, so it cannot go on past its await while the
        // answer arrives and the cancellation comes after it: the answer won, and the
        // advertising stays on (the cancellation used to stop it, and the call still returned).
        let executor = HeldExecutor()
        fixture.queue.suspend()
        let starting = Task(executorPreference: executor) {
            try await fixture.manager.startAdvertising([CBAdvertisementDataLocalNameKey: "Answered"])
        }
        executor.queue.sync {}  // the task's first run ended at its await
        executor.queue.suspend()
        fixture.queue.resume()
        await seen.wait(for: "advertising")
        fixture.queue.sync {}  // every tap has heard the answer
        starting.cancel()
        executor.queue.resume()
        try await starting.value
        try await fixture.manager.add(CBMutableService(type: CBUUID(string: "5A1E10FE-0000-1000-8000-00805F9B34FB"), primary: true))
        #expect(fixture.manager.isAdvertising)
    }

    @Test func aCancelledUpdateValueSendsNothingAndThrows() async throws {
        let fixture = await AsyncPeripheralFixture()
        try await fixture.manager.add(fixture.makeService())
        let manager = fixture.manager
        let characteristic = fixture.notifyingCharacteristic
        // With the stack's loop held, nothing drains the manager's transmit queue: it fills.
        let loop = try #require(manager.device).loop
        let hold = DispatchSemaphore(value: 0)
        loop.execute { hold.wait() }
        defer { hold.signal() }
        var accepted = 0
        while manager.updateValue(Data([0]), for: characteristic, onSubscribedCentrals: nil) { accepted += 1 }
        #expect(accepted > 0)
        let updating = Task { try await manager.updateValue(Data([1]), for: characteristic, onSubscribedCentrals: nil) }
        updating.cancel()
        await #expect(throws: CancellationError.self) { try await updating.value }
    }

    @Test func aChannelOpensBothWaysAndAnUnknownPSMThrows() async throws {
        let fixture = await AsyncPeripheralFixture()
        let psm = try await fixture.manager.publishL2CAPChannel(withEncryption: false)
        #expect((0x0080...0x00FF).contains(psm))
        var incoming = fixture.manager.openedChannels.makeAsyncIterator()
        try await fixture.publish()
        let (peripheral, _) = try await fixture.connect()
        let channel = try await peripheral.openL2CAPChannel(psm)
        #expect(channel.psm == psm)
        #expect(channel.peer === peripheral)
        let accepted = await incoming.next()
        #expect(accepted?.psm == psm)
        #expect(accepted?.peer is CBCentral)
        let error = await #expect(throws: CBError.self) { try await peripheral.openL2CAPChannel(psm + 1) }
        #expect(error?.localizedDescription.contains("no L2CAP channel published") == true)
        // On a peripheral that disconnected, an open fails at once, as every await does.
        fixture.central.cancelPeripheralConnection(peripheral)
        await #expect(throws: CBError.self) { try await peripheral.openL2CAPChannel(psm) }
    }
}

/// Hears that advertising started, beside the async extension's own tap.
private final class AdvertisingWatcher: NSObject, CBPeripheralManagerDelegate {
    private let seen: Happenings

    init(_ seen: Happenings) { self.seen = seen }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {}

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        seen.append("advertising")
    }
}

/// A task executor on a serial queue the test can suspend: a task that prefers it does not
/// run while the queue is held.
private final class HeldExecutor: TaskExecutor {
    let queue = DispatchQueue(label: "held task executor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
