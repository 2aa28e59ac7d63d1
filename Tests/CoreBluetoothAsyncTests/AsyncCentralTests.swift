import CoreBluetooth
import CoreBluetoothAsync
import Foundation
import Testing

/// A central with the app's delegate and a test peripheral, on a private radio of their own.
/// The radio runs on the wall clock: async code awaits callbacks that a virtual clock would
/// only deliver while a thread waits in `run(until:)`, and packets are instant, so a test takes
/// about an advertising interval.
struct AsyncFixture {
    let radio = CBVirtualRadio(clock: .realTime)
    let app = AppDelegate()
    let central: CBCentralManager
    let server = TestPeripheral()

    init() async {
        let (radio, app) = (radio, app)
        central = CBVirtualRadio.withCurrent(radio) {
            CBCentralManager(delegate: app, queue: DispatchQueue(label: "test central"))
        }
        server.start(on: radio)
        await server.happenings.wait(for: "advertising")
    }

    /// The first discovery of the test peripheral (the scan stops when the loop ends).
    func discover() async throws -> CBDiscovery {
        for await discovery in central.discoveries(withServices: [TestPeripheral.service])
        where discovery.advertisementData[CBAdvertisementDataLocalNameKey] as? String == "Async" {
            return discovery
        }
        throw CBError(.unknownDevice)
    }

    /// The test peripheral, connected, with its service's characteristics discovered.
    func connected() async throws -> (CBPeripheral, [CBCharacteristic]) {
        let peripheral = try await discover().peripheral
        peripheral.delegate = app
        try await central.connect(peripheral)
        let service = try #require(try await peripheral.services([TestPeripheral.service]).first)
        return (peripheral, try await peripheral.characteristics(nil, for: service))
    }
}

extension [CBCharacteristic] {
    func with(_ uuid: CBUUID) throws -> CBCharacteristic { try #require(first { $0.uuid == uuid }) }
}

@Suite(.timeLimit(.minutes(1)))
struct AsyncCentralTests {
    @Test func stateUpdatesStartWithTheCurrentState() async throws {
        let fixture = await AsyncFixture()
        var states = fixture.central.stateUpdates.makeAsyncIterator()
        let first = await states.next()
        // Powered on, or about to be: the next one is then .poweredOn.
        let on = first == .poweredOn ? first : await states.next()
        #expect(on == .poweredOn)
    }

    @Test func discoveryScansWhileIteratedAndStopsAfter() async throws {
        let fixture = await AsyncFixture()
        let discovery = try await fixture.discover()
        #expect(discovery.advertisementData[CBAdvertisementDataServiceUUIDsKey] as? [CBUUID] == [TestPeripheral.service])
        #expect(discovery.rssi < 0)
        #expect(!fixture.central.isScanning)
    }

    @Test func connectDiscoverReadWriteRSSIAndDisconnect() async throws {
        let fixture = await AsyncFixture()
        let (peripheral, characteristics) = try await fixture.connected()
        #expect(peripheral.state == .connected)
        // The app's delegate heard the connection too.
        await fixture.app.happenings.wait(for: "connected")

        let readable = try characteristics.with(TestPeripheral.readable)
        #expect(try await peripheral.read(readable) == TestPeripheral.readValue)

        let writable = try characteristics.with(TestPeripheral.writable)
        try await peripheral.write(Data("with".utf8), to: writable, type: .withResponse)
        // More writes without response than the link takes at once: the later ones await room.
        for index in 0 ..< 100 {
            try await peripheral.write(Data([UInt8(index)]), to: writable, type: .withoutResponse)
        }
        try await peripheral.write(Data("last".utf8), to: writable, type: .withResponse)
        let writes = fixture.server.writes.withLock { $0 }
        // Everything in the order it was asked for: the last write with response waited for
        // the writes without response still queued before it (it used to pass them, and the
        // check ran before the last of them had arrived).
        #expect(writes == [Data("with".utf8)] + (0 ..< 100).map { Data([UInt8($0)]) } + [Data("last".utf8)])

        let descriptors = try await peripheral.descriptors(for: try characteristics.with(TestPeripheral.notifying))
        #expect(descriptors.contains { $0.uuid == CBUUID(string: CBUUIDClientCharacteristicConfigurationString) })

        let rssi = try await peripheral.readRSSI()
        #expect(rssi < 0 && rssi > -128)

        try await fixture.central.cancelConnection(peripheral)
        #expect(peripheral.state == .disconnected)
        await fixture.app.happenings.wait(for: "disconnected")
    }

    @Test func notificationsSubscribeWhileIteratedAndUnsubscribeWhenCancelled() async throws {
        let fixture = await AsyncFixture()
        let (peripheral, characteristics) = try await fixture.connected()
        let notifying = try characteristics.with(TestPeripheral.notifying)
        let server = fixture.server
        let received = Task {
            var values: [Data] = []
            for try await value in peripheral.notifications(for: notifying) {
                values.append(value)
                if values.count == 3 { break }
            }
            return values
        }
        await server.happenings.wait(for: "subscribed")
        for value in 1 ... 3 { #expect(server.notify(Data([UInt8(value)]))) }
        #expect(try await received.value == [Data([1]), Data([2]), Data([3])])
        await server.happenings.wait(for: "unsubscribed")

        // A loop cancelled while it waits ends, and unsubscribes.
        let waiting = Task {
            for try await _ in peripheral.notifications(for: notifying) {}
        }
        await server.happenings.wait(for: "subscribed", count: 2)
        waiting.cancel()
        _ = await waiting.result
        await server.happenings.wait(for: "unsubscribed", count: 2)
        #expect(server.happenings.all.filter { $0 == "unsubscribed" }.count == 2)
        // The app's delegate heard the values too.
        #expect(fixture.app.happenings.all.contains("value \(TestPeripheral.notifying)"))
    }

    @Test func cancellingConnectCancelsThePendingConnection() async throws {
        let fixture = await AsyncFixture()
        let peripheral = try await fixture.discover().peripheral
        // Nothing on the radio at this address any more: the connection stays pending.
        fixture.server.stopAdvertising()
        await fixture.server.happenings.wait(for: "stopped")
        let connecting = Task { try await fixture.central.connect(peripheral) }
        while peripheral.state != .connecting { await Task.yield() }
        connecting.cancel()
        await #expect(throws: CancellationError.self) { try await connecting.value }
        await fixture.app.happenings.wait(for: "disconnected")
        #expect(peripheral.state == .disconnected)
    }

    @Test func aDisconnectionFailsAPendingReadAndEndsNotifications() async throws {
        let fixture = await AsyncFixture()
        let (peripheral, characteristics) = try await fixture.connected()
        let server = fixture.server
        server.holdReads.withLock { $0 = true }
        let notifications = Task {
            for try await _ in peripheral.notifications(for: try characteristics.with(TestPeripheral.notifying)) {}
        }
        // Subscribed first: ATT has one request out at a time, and the held read would block it.
        await server.happenings.wait(for: "subscribed")
        let reading = Task { try await peripheral.read(try characteristics.with(TestPeripheral.readable)) }
        await server.happenings.wait(for: "read")
        fixture.central.cancelPeripheralConnection(peripheral)
        let readError = await #expect(throws: CBError.self) { try await reading.value }
        #expect(readError?.code == .peripheralDisconnected)
        let notificationError = await #expect(throws: CBError.self) { try await notifications.value }
        #expect(notificationError?.code == .peripheralDisconnected)
        // And awaits on a disconnected peripheral fail at once.
        await #expect(throws: CBError.self) { try await peripheral.readRSSI() }
    }

    @Test func aDisconnectionFailsEveryAwaitUnderWay() async throws {
        let fixture = await AsyncFixture()
        let (peripheral, characteristics) = try await fixture.connected()
        let server = fixture.server
        let service = try #require(peripheral.services?.first { $0.uuid == TestPeripheral.service })
        let notifying = try characteristics.with(TestPeripheral.notifying)
        let writable = try characteristics.with(TestPeripheral.writable)
        // A held read keeps the bearer busy (one ATT request at a time): every request below
        // waits behind it, so the disconnection comes in the middle of each await.
        server.holdReads.withLock { $0 = true }
        let reading = Task { _ = try await peripheral.read(try characteristics.with(TestPeripheral.readable)) }
        await server.happenings.wait(for: "read")
        let acceptedBefore = peripheral.acceptedCallCount
        let awaits: [Task<Void, any Error>] = [
            reading,
            Task { _ = try await peripheral.services(nil) },
            Task { _ = try await peripheral.characteristics(nil, for: service) },
            Task { _ = try await peripheral.descriptors(for: notifying) },
            Task { try await peripheral.write(Data("queued".utf8), to: writable, type: .withResponse) },
            Task { for try await _ in peripheral.notifications(for: notifying) {} },
        ]
        // Each await puts its tap on, then makes its call: the cancel comes once every call was
        // accepted (the five after the read), not merely tapped, or a call made after it fails
        // as notConnected.
        while peripheral.eventTapCount < awaits.count || peripheral.acceptedCallCount < acceptedBefore + awaits.count - 1 {
            await Task.yield()
        }
        fixture.central.cancelPeripheralConnection(peripheral)
        for task in awaits {
            let error = await #expect(throws: CBError.self) { try await task.value }
            #expect(error?.code == .peripheralDisconnected)
        }
        #expect(peripheral.eventTapCount == 0)
    }
}
