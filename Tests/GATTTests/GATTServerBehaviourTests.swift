import ATT
import AssignedNumbers
import ByteCoding
import GATT
import L2CAP
import LECrypto
import Scheduling
import Testing

@Suite("GATT server: notifications, indications, Service Changed (GATT/SR/GAN, GAI, GAS), over ATT bearers")
struct GATTServerNotificationTests {
    let f = Fixture()
    let loop = EventLoop(name: "gatt", pacing: .manual)

    @Test("Notifications (GATT/SR/GAN/BV-01-C)")
    func notifications() {
        let a = BearerClient(f.server, loop: loop)
        let b = BearerClient(f.server, loop: loop)
        #expect(a.send("12 1c00 0100") == ["13"])
        #expect(f.server.updateValue([1, 2, 3], forCharacteristic: 0x001B))
        // Only the subscriber gets it: Handle Value Notification, handle 0x001B.
        #expect(a.takeSent() == ["1b1b00010203"])
        #expect(b.takeSent().isEmpty)
        // Cut to ATT_MTU − 3 = 20 octets; after an exchange to 32, to 29.
        f.server.updateValue([UInt8](0..<40), forCharacteristic: 0x001B)
        #expect(a.takeSent() == ["1b1b00" + hexRange(0..<20)])
        #expect(a.send("02 2000") == ["030502"])
        let value = [UInt8](0..<40)
        f.server.updateValue(value[1...], forCharacteristic: 0x001B)
        #expect(a.takeSent() == ["1b1b00" + hexRange(1..<30)])
        // Not sent to a connection outside the chosen ones.
        #expect(f.server.updateValue([9], forCharacteristic: 0x001B, onlyTo: [b.connection]))
        #expect(a.takeSent().isEmpty && b.takeSent().isEmpty)
    }

    @Test("Indications (GATT/SR/GAI/BV-01-C): one at a time, each after a confirmation")
    func indications() {
        let a = BearerClient(f.server, loop: loop)
        var handedOver: [Int] = []
        f.server.onUpdatesHandedOver = { count, _ in handedOver.append(count) }
        #expect(a.send("12 1c00 0200") == ["13"])
        #expect(f.server.updateValue([1], forCharacteristic: 0x001B))
        // The second waits for the first one's confirmation.
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        #expect(a.takeSent() == ["1d1b0001"])
        a.confirm()
        #expect(a.takeSent() == ["1d1b0002"])
        #expect(handedOver == [1] && f.server.waitingUpdates == 0)
        a.confirm()
        #expect(a.takeSent().isEmpty)
        // Unconfirmed for 30 s: the bearer closes, and the connection with it.
        #expect(f.server.updateValue([3], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([4], forCharacteristic: 0x001B))
        loop.run(for: .seconds(30))
        #expect(a.bearer.closeReason == .transactionTimeout)
        #expect(f.server.subscribers(ofCharacteristic: 0x001B).isEmpty)
        #expect(handedOver == [1, 1] && f.server.waitingUpdates == 0)
        #expect(a.takeSent() == ["1d1b0003"])
    }

    @Test("A full link queue holds updates until the bearer can send again; they go in order")
    func backPressure() {
        let a = BearerClient(f.server, loop: loop)
        var handedOver: [Int] = []
        f.server.onUpdatesHandedOver = { count, _ in handedOver.append(count) }
        #expect(a.send("12 1c00 0100") == ["13"])
        a.fillLinkQueue()
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        #expect(a.takeSent().isEmpty && f.server.waitingUpdates(for: a.connection) == 2)
        a.drainLinkQueue()
        #expect(a.takeSent() == ["1b1b0001", "1b1b0002"])
        #expect(handedOver == [2] && f.server.waitingUpdates == 0)
        // Nothing waits: readiness reports nothing.
        a.drainLinkQueue()
        #expect(handedOver == [2])
    }

    @Test("Updates that waited are counted under their owner: each user of a shared server keeps its own budget")
    func handedOverPerOwner() {
        let a = BearerClient(f.server, loop: loop)
        var handedOver: [String] = []
        f.server.onUpdatesHandedOver = { count, owner in handedOver.append("\(owner):\(count)") }
        #expect(a.send("12 1c00 0100") == ["13"])
        a.fillLinkQueue()
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B, owner: 2))
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B, owner: 0))
        #expect(!f.server.updateValue([3], forCharacteristic: 0x001B, owner: 2))
        a.drainLinkQueue()
        #expect(a.takeSent() == ["1b1b0001", "1b1b0002", "1b1b0003"])
        #expect(handedOver == ["0:1", "2:2"])
    }

    @Test("Disconnection ends subscriptions, reported as unsubscribes, and drops what waited")
    func connectionClosed() {
        let a = BearerClient(f.server, loop: loop)
        var events: [String] = []
        f.server.onSubscriptionChange = { _, handle, old, new in events.append("\(handle) \(old.rawValue)>\(new.rawValue)") }
        var handedOver = 0
        f.server.onUpdatesHandedOver = { count, _ in handedOver += count }
        #expect(a.send("12 1c00 0300") == ["13"])
        #expect(a.send("12 1100 0100") == ["13"])
        #expect(f.server.subscribers(ofCharacteristic: 0x001B).count == 1)
        f.server.updateValue([1], forCharacteristic: 0x001B) // notification preferred when both
        #expect(a.takeSent() == ["1b1b0001"])
        a.fillLinkQueue()
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        a.disconnect()
        #expect(events == ["0x001B 0>3", "0x0010 0>1", "0x0010 1>0", "0x001B 3>0"])
        #expect(handedOver == 1 && f.server.waitingUpdates == 0)
        #expect(f.server.subscribers(ofCharacteristic: 0x001B).isEmpty)
        #expect(f.server.updateValue([3], forCharacteristic: 0x001B))
        #expect(a.takeSent().isEmpty)
    }

    @Test("A bonded client's subscriptions come back as written; unknown handles and bits not allowed are skipped")
    func restoredSubscriptions() {
        let a = BearerClient(f.server, loop: loop)
        var events: [String] = []
        f.server.onSubscriptionChange = { _, handle, old, new in events.append("\(handle) \(old.rawValue)>\(new.rawValue)") }
        // 0x001B notifies and indicates; 0x0010 notifies only (its CCCD refuses indication);
        // 0x0003 has no CCCD.
        f.server.restoreClientConfigurations([0x001B: [.notification, .indication], 0x0010: .indication, 0x0003: .notification],
                                             for: a.connection)
        #expect(events == ["0x001B 0>3"])
        #expect(f.server.clientConfiguration(ofCharacteristic: 0x001B, for: a.connection) == [.notification, .indication])
        // The client reads back what it had written in the earlier connection.
        #expect(a.send("0a 1c00") == ["0b0300"])
        f.server.updateValue([1], forCharacteristic: 0x001B)
        #expect(a.takeSent() == ["1b1b0001"])
    }

    @Test("Service Changed (GATT/SR/GAS/BV-01-C): indicated with the affected range on add and remove")
    func serviceChanged() throws {
        let a = BearerClient(f.server, loop: loop)
        let bystander = BearerClient(f.server, loop: loop)
        #expect(a.send("12 0900 0200") == ["13"])
        // A 3-attribute service goes after the last one: 0x0028…0x002A.
        let d = try f.server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1811), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A47), properties: .read, permissions: .readable, value: .stored([1])),
        ]))
        #expect(d.range == ATTHandle(0x0028)...ATTHandle(0x002A))
        #expect(a.takeSent() == [hx("1d0800 2800 2a00")])
        // Removing C (0x0025…0x0027) is indicated after the first is confirmed.
        try f.server.removeService(f.serviceC.id)
        #expect(a.takeSent().isEmpty)
        a.confirm()
        #expect(a.takeSent() == ["1d080025002700"])
        #expect(bystander.takeSent().isEmpty)
        #expect(a.send("10 2500 ffff 0028") == [hx("11 06 2800 2a00 1118")])
        // A service that fits the freed gap takes it; the others keep their handles.
        let e = try f.server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1812)))
        #expect(e.range == ATTHandle(0x0025)...ATTHandle(0x0025))
        a.confirm()
        #expect(a.takeSent() == ["1d080025002500"])
        #expect(a.send("10 2500 ffff 0028") == [hx("11 06 2500 2500 1218 2800 2a00 1118")])
    }

    @Test("Removing a service ends subscriptions to it; included services cannot go first")
    func removeService() throws {
        let f = Fixture()
        var events: [String] = []
        f.server.onSubscriptionChange = { _, handle, old, new in events.append("\(handle) \(old.rawValue)>\(new.rawValue)") }
        expectExchange(f.server, f.connection, "12 1100 0100", "13")
        #expect(throws: GATTDatabaseError.serviceIsIncluded(f.serviceA.id)) { try f.server.removeService(f.serviceB.id) }
        #expect(throws: GATTDatabaseError.builtInService) { try f.server.removeService(f.server.gapService.id) }
        try f.server.removeService(f.serviceA.id)
        try f.server.removeService(f.serviceB.id)
        #expect(events == ["0x0010 0>1", "0x0010 1>0"])
        expectExchange(f.server, f.connection, "0a 1000", "01 0a 1000 01")
        f.server.removeAllServices()
        expectExchange(f.server, f.connection, "10 0e00 ffff 0028", "01 10 0e00 0a")
    }

    @Test("removeAllServices removes includers before what they include")
    func removeAll() {
        let f = Fixture()
        f.server.removeAllServices()
        expectExchange(f.server, f.connection, "04 0e00 ffff", "01 04 0e00 0a")
        #expect(f.server.handles(of: f.serviceA.id) == nil)
    }
}

@Suite("GATT server: update queues (order, partial refusal, indication window, hand-over counts)")
struct GATTServerUpdateQueueTests {
    let f = Fixture()
    let other = FakeConnection()
    /// What `onUpdatesHandedOver` reported, one entry per report.
    final class Reports { var counts: [Int] = [] }
    let handedOver = Reports()

    init() {
        f.server.connectionOpened(other)
        f.server.onUpdatesHandedOver = { [handedOver] count, _ in handedOver.counts.append(count) }
    }

    func sent(_ connection: FakeConnection) -> [String] { connection.sent.map(\.hexString) }

    @Test("Updates wait in order behind one the connection refused, and are counted once handed over")
    func orderBehindARefusal() {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        // The connection would take the next one, but it goes behind the first.
        f.connection.room = .max
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([3], forCharacteristic: 0x001B))
        #expect(f.connection.sent.isEmpty && f.server.waitingUpdates == 3)
        // Room for one: one goes, the rest wait for the next readiness.
        f.connection.room = 1
        f.server.connectionIsReadyToSend(f.connection)
        #expect(sent(f.connection) == ["1b1b0001"])
        #expect(handedOver.counts == [1] && f.server.waitingUpdates(for: f.connection) == 2)
        f.connection.room = .max
        f.server.connectionIsReadyToSend(f.connection)
        #expect(sent(f.connection) == ["1b1b0001", "1b1b0002", "1b1b0003"])
        // One report per pass, not per update.
        #expect(handedOver.counts == [1, 2] && f.server.waitingUpdates == 0)
        f.server.connectionIsReadyToSend(f.connection)
        #expect(f.server.updateValue([4], forCharacteristic: 0x001B))
        #expect(handedOver.counts == [1, 2])
    }

    @Test("A connection that refuses holds up only itself; an update is counted when its last target takes it")
    func partialRefusal() {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        expectExchange(f.server, other, "12 1c00 0100", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        #expect(sent(other) == ["1b1b0001", "1b1b0002"] && f.connection.sent.isEmpty)
        #expect(f.server.waitingUpdates == 2)
        f.connection.room = 1
        f.server.connectionIsReadyToSend(f.connection)
        #expect(handedOver.counts == [1] && f.server.waitingUpdates == 1)
        // Only the chosen targets: `other` takes it now, the waiting connection is not asked.
        #expect(f.server.updateValue([3], forCharacteristic: 0x001B, onlyTo: [other]))
        // Chosen, but not subscribed: nobody to send it to.
        let bystander = FakeConnection()
        f.server.connectionOpened(bystander)
        #expect(f.server.updateValue([4], forCharacteristic: 0x001B, onlyTo: [bystander]))
        f.connection.room = .max
        f.server.connectionIsReadyToSend(f.connection)
        #expect(sent(f.connection) == ["1b1b0001", "1b1b0002"])
        #expect(sent(other) == ["1b1b0001", "1b1b0002", "1b1b0003"])
        #expect(bystander.sent.isEmpty && handedOver.counts == [1, 1])
    }

    @Test("Indication window: unconfirmed indications up to the window, then the connection's updates wait")
    func indicationWindow() {
        f.server.indicationWindow = 2
        expectExchange(f.server, f.connection, "12 1c00 0200", "13")
        expectExchange(f.server, f.connection, "12 1100 0100", "13")
        #expect(f.server.updateValue([1], forCharacteristic: 0x001B))
        #expect(f.server.updateValue([2], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([3], forCharacteristic: 0x001B))
        // A notification of another characteristic waits behind it: one order per connection.
        #expect(!f.server.updateValue([9], forCharacteristic: 0x0010))
        #expect(sent(f.connection) == ["1d1b0001", "1d1b0002"])
        f.connection.confirm()
        #expect(sent(f.connection) == ["1d1b0001", "1d1b0002", "1d1b0003", "1b100009"])
        #expect(handedOver.counts == [2] && f.connection.unconfirmedIndications == 2)
        // An indication that fails (timeout, link down) frees its place in the window too.
        #expect(f.server.updateValue([4], forCharacteristic: 0x001B) == false)
        f.connection.confirm(false)
        #expect(sent(f.connection).last == "1d1b0004" && handedOver.counts == [2, 1])
    }

    @Test("Removing a service drops what waits for its characteristics; what is left goes on")
    func serviceRemoval() throws {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        expectExchange(f.server, f.connection, "12 1100 0100", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([2], forCharacteristic: 0x0010))
        #expect(!f.server.updateValue([3], forCharacteristic: 0x001B))
        // Service A (0x0012…0x0024) goes: its two updates are dropped, and B's, first now, is
        // sent — all counted in one report.
        f.connection.room = .max
        try f.server.removeService(f.serviceA.id)
        #expect(sent(f.connection) == ["1b100002"])
        #expect(handedOver.counts == [3] && f.server.waitingUpdates == 0)
        #expect(f.server.updateValue([4], forCharacteristic: 0x001B))
        #expect(sent(f.connection) == ["1b100002"])
    }

    @Test("Closing a connection drops its queue and releases what waited only for it")
    func connectionClose() {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        expectExchange(f.server, other, "12 1c00 0100", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B)) // waits for f.connection only
        other.room = 0
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B)) // waits for both
        f.server.connectionClosed(f.connection)
        #expect(handedOver.counts == [1] && f.server.waitingUpdates == 1)
        // Readiness of a closed connection is nothing.
        f.server.connectionIsReadyToSend(f.connection)
        other.room = .max
        f.server.connectionIsReadyToSend(other)
        #expect(sent(other) == ["1b1b0001", "1b1b0002"] && f.connection.sent.isEmpty)
        #expect(handedOver.counts == [1, 1] && f.server.waitingUpdates == 0)
    }

    @Test("Notify or indicate is decided when an update leaves the queue; unsubscribing drops it")
    func subscriptionChangesWhileWaiting() {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        #expect(!f.server.updateValue([2], forCharacteristic: 0x001B))
        // Now indications: the first goes as one, the second waits for its confirmation.
        expectExchange(f.server, f.connection, "12 1c00 0200", "13")
        #expect(sent(f.connection) == ["1d1b0001"] && handedOver.counts == [1])
        expectExchange(f.server, f.connection, "12 1c00 0000", "13")
        #expect(handedOver.counts == [1, 1] && f.server.waitingUpdates == 0)
        f.connection.confirm()
        #expect(sent(f.connection) == ["1d1b0001"])
    }

    @Test("Service Changed waits in the same queue as the values, and counts in no report")
    func serviceChangedInOrder() throws {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        expectExchange(f.server, f.connection, "12 0900 0200", "13")
        f.connection.room = 0
        #expect(!f.server.updateValue([1], forCharacteristic: 0x001B))
        try f.server.removeService(f.serviceC.id)
        #expect(f.connection.sent.isEmpty && f.server.waitingUpdates(for: f.connection) == 2)
        f.connection.room = .max
        f.server.connectionIsReadyToSend(f.connection)
        #expect(sent(f.connection) == ["1b1b0001", "1d080025002700"])
        #expect(handedOver.counts == [1])
    }

    @Test("Many updates through a queue that refuses now and then arrive in order, each counted once")
    func longRun() {
        expectExchange(f.server, f.connection, "12 1c00 0100", "13")
        expectExchange(f.server, other, "12 1c00 0100", "13")
        var rng = SeededGenerator(seed: 0x0DDB)
        var immediate = 0
        for i in 0..<5_000 {
            f.connection.room = Int.random(in: 0...3, using: &rng)
            other.room = Int.random(in: 0...3, using: &rng)
            let value = [UInt8(truncatingIfNeeded: i), UInt8(truncatingIfNeeded: i >> 8)]
            if f.server.updateValue(value, forCharacteristic: 0x001B) { immediate += 1 }
            if Bool.random(using: &rng) { f.server.connectionIsReadyToSend(f.connection) }
            if Bool.random(using: &rng) { f.server.connectionIsReadyToSend(other) }
        }
        f.connection.room = .max
        other.room = .max
        f.server.connectionIsReadyToSend(f.connection)
        f.server.connectionIsReadyToSend(other)
        let expected = (0..<5_000).map { "1b1b00" + [UInt8(truncatingIfNeeded: $0), UInt8(truncatingIfNeeded: $0 >> 8)].hexString }
        #expect(sent(f.connection) == expected && sent(other) == expected)
        #expect(immediate + handedOver.counts.reduce(0, +) == 5_000 && f.server.waitingUpdates == 0)
    }
}

@Suite("GATT server: database hash and layout")
struct GATTServerDatabaseTests {
    @Test("Database Hash of the GAP + GATT database (Vol 3 Part G §7.3)")
    func databaseHash() {
        let server = GATTServer(deviceName: "Test", appearance: 0x0340)
        // The hash input, attribute by attribute (handle, type, then the value for service,
        // include, characteristic and extended-properties declarations; handle and type only
        // for the CCCD and the other listed descriptors; nothing for values):
        let message = [UInt8](hex: """
            0100 0028 0018
            0200 0328 02 0300 002a
            0400 0328 02 0500 012a
            0600 0028 0118
            0700 0328 20 0800 052a
            0900 0229
            0a00 0328 0a 0b00 292b
            0c00 0328 02 0d00 2a2b
            """)!
        // AES-CMAC with key 0 gives the MAC most significant octet first; the characteristic
        // carries it little-endian.
        let expected = Array(LECrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: message).reversed())
        #expect(server.databaseHash == expected)
        // Pinned, so a change of byte order or of the attributes hashed shows.
        #expect(expected.hexString == "1fb2c245f82240f72b06c5266375ce16")
        let connection = FakeConnection()
        expectExchange(server, connection, "0a 0d00", "0b" + expected.hexString)
        // Values do not enter the hash: a new device name leaves it alone.
        server.deviceName = "Other"
        expectExchange(server, connection, "0a 0300", "0b 4f74686572")
        #expect(server.databaseHash == expected)
    }

    @Test("Database Hash covers includes, extended properties and descriptors, and changes with the database")
    func databaseHashOfFixture() throws {
        let f = Fixture()
        let before = f.server.databaseHash
        // Service B's and A's declarations and descriptors, hand-assembled after the GAP/GATT part.
        let message = [UInt8](hex: """
            0100 0028 0018  0200 0328 02 0300 002a  0400 0328 02 0500 012a
            0600 0028 0118  0700 0328 20 0800 052a  0900 0229  0a00 0328 0a 0b00 292b  0c00 0328 02 0d00 2a2b
            0e00 0128 0f18  0f00 0328 12 1000 192a  1100 0229
            1200 0028 0d18  1300 0228 0e00 1100 0f18
            1400 0328 02 1500 382a
            1600 0328 8a 1700 392a  1800 0029 0100  1900 0129
            1a00 0328 30 1b00 3a2a  1c00 0229
            1d00 0328 0a 1e00 3b2a  1f00 0328 02 2000 3c2a  2100 0328 08 2200 3d2a  2300 0328 0a 2400 3e2a
            2500 0028 f0debc9a785634127856341278563412
            2600 0328 02 2700 f1debc9a785634127856341278563412
            """)!
        #expect(before == Array(LECrypto.aesCMAC(key: [UInt8](repeating: 0, count: 16), message: message).reversed()))
        try f.server.removeService(f.serviceC.id)
        #expect(f.server.databaseHash != before)
    }

    @Test("Oversized values, unknown includes and unknown services are refused")
    func databaseErrors() throws {
        let server = GATTServer()
        let gone = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1233))).id
        try server.removeService(gone)
        #expect(throws: GATTDatabaseError.valueTooLong) {
            try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1234), characteristics: [
                GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A00), properties: .read, permissions: .readable,
                                   value: .stored([UInt8](repeating: 0, count: 513))),
            ]))
        }
        #expect(throws: GATTDatabaseError.unknownIncludedService(gone)) {
            try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1234), includedServices: [gone]))
        }
        #expect(throws: GATTDatabaseError.unknownService(gone)) { try server.removeService(gone) }
        #expect(throws: GATTDatabaseError.notStored(0x0001)) { try server.setValue([1], for: 0x0001) }
    }

    @Test("Handles run out at 0xFFFF")
    func outOfHandles() throws {
        let server = GATTServer()
        let characteristic = GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A00), properties: .read, permissions: .readable,
                                                value: .stored([0]))
        let big = GATTService(uuid: BluetoothUUID(uuid16: 0x1234),
                              characteristics: Array(repeating: characteristic, count: 30_000))
        let handles = try server.addService(big)
        #expect(handles.range == ATTHandle(0x000E)...ATTHandle(0x000E + 60_000))
        #expect(throws: GATTDatabaseError.outOfHandles) { try server.addService(big) }
        let last = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x1235),
            characteristics: Array(repeating: characteristic, count: (0xFFFF - 0x000E - 60_000 - 1) / 2)))
        #expect(last.range.upperBound <= ATTHandle.max)
    }

    @Test("Presentation Format and other descriptors are laid out after the automatic ones")
    func descriptorLayout() throws {
        let server = GATTServer()
        let handles = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x181A), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A6E), properties: [.read, .notify],
                               extendedProperties: .writableAuxiliaries, permissions: .readable, value: .stored([0x34, 0x12]),
                               descriptors: [.presentationFormat(format: 0x0E, exponent: -2, unit: 0x272F),
                                             .userDescription("T")]),
        ]))
        let c = handles.characteristics[0]
        #expect(c.declaration == 0x000F && c.value == 0x0010 && c.clientConfiguration == 0x0012)
        #expect(c.descriptors == [0x0013, 0x0014])
        let connection = FakeConnection()
        expectExchange(server, connection, "04 1000 1400", "05 01 1000 6e2a 1100 0029 1200 0229 1300 0429 1400 0129")
        // Declaration: read|notify|extended = 0x92.
        expectExchange(server, connection, "0a 0f00", "0b 92 1000 6e2a")
        expectExchange(server, connection, "0a 1100", "0b 0200")
        // Format sint16 (0x0E), exponent −2, unit 0x272F (°C), namespace SIG, description 0.
        expectExchange(server, connection, "0a 1300", "0b 0e fe 2f27 01 0000")
    }
}

@Suite("GATT server: dynamic values")
struct GATTServerDynamicValueTests {
    @Test("A dynamic read answered later, with the offset for Read Blob")
    func asynchronousRead() {
        let f = Fixture()
        var pending: [(GATTReadRequest, (Result<[UInt8], ATTErrorCode>) -> Void)] = []
        f.server.onRead = { pending.append(($0, $1)) }
        var responses: [String] = []
        f.server.handle(try! ATTPDU(decoding: [0x0A, 0x17, 0x00]), from: f.connection) { responses.append($0.encode().hexString) }
        #expect(responses.isEmpty)
        #expect(pending.count == 1 && pending[0].0.handle == 0x0017 && pending[0].0.offset == 0)
        let value = Array(UInt8(0x40)..<UInt8(0x70)) // 48 octets
        pending[0].1(.success(value))
        // Answered once only, whatever the owner does.
        pending[0].1(.success([1]))
        #expect(responses == ["0b" + value.prefix(22).hexString])

        f.server.handle(try! ATTPDU(decoding: [0x0C, 0x17, 0x00, 0x16, 0x00]), from: f.connection) { responses.append($0.encode().hexString) }
        #expect(pending[1].0.offset == 22)
        pending[1].1(.success(Array(value.dropFirst(22))))
        #expect(responses.last == "0d" + value.dropFirst(22).prefix(22).hexString)
    }

    @Test("A dynamic read answered with an error")
    func readError() {
        let f = Fixture()
        f.server.onRead = { _, respond in respond(.failure(.application(0x01))) }
        expectExchange(f.server, f.connection, "0a 1700", "01 0a 1700 81")
        f.server.onRead = { _, respond in respond(.failure(.invalidOffset)) }
        expectExchange(f.server, f.connection, "0c 1700 0900", "01 0c 1700 07")
        // No owner to ask.
        f.server.onRead = nil
        expectExchange(f.server, f.connection, "0a 1700", "01 0a 1700 0e")
    }

    @Test("Read By Type over dynamic values reads them in turn")
    func readByTypeDynamic() {
        let f = Fixture()
        f.server.onRead = { request, respond in respond(.success([UInt8(request.handle.rawValue)])) }
        expectExchange(f.server, f.connection, "08 0100 ffff 392a", "09 03 1700 17")
    }

    @Test("A dynamic write answered later, and with an error")
    func asynchronousWrite() {
        let f = Fixture()
        var pending: [([GATTWriteRequest], (ATTErrorCode?) -> Void)] = []
        f.server.onWrite = { pending.append(($0, $1)) }
        var responses: [String] = []
        f.server.handle(try! ATTPDU(decoding: [0x12, 0x17, 0x00, 0xAB]), from: f.connection) { responses.append($0.encode().hexString) }
        #expect(responses.isEmpty)
        #expect(pending[0].0.map(\.value) == [[0xAB]])
        pending[0].1(nil)
        #expect(responses == ["13"])
        f.server.handle(try! ATTPDU(decoding: [0x12, 0x17, 0x00, 0xCD]), from: f.connection) { responses.append($0.encode().hexString) }
        pending[1].1(.writeRequestRejected)
        #expect(responses == ["13", "01121700fc"])
        // A Write Command reaches the owner too, marked as such; its answer goes nowhere.
        expectExchange(f.server, f.connection, "52 1700 ef", nil)
        #expect(pending[2].0[0].isCommand)
        pending[2].1(.unlikelyError)
    }

    @Test("A prepared write arrives as one batch, answered once; failure writes nothing")
    func preparedWriteBatch() {
        let f = Fixture()
        var batches: [[GATTWriteRequest]] = []
        var verdict: ATTErrorCode? = nil
        f.server.onWrite = { requests, respond in
            batches.append(requests)
            respond(verdict)
        }
        expectExchange(f.server, f.connection, "16 1700 0000 0102", "17 1700 0000 0102")
        expectExchange(f.server, f.connection, "16 1e00 0000 0707", "17 1e00 0000 0707")
        expectExchange(f.server, f.connection, "16 1700 0200 0304", "17 1700 0200 0304")
        verdict = .application(0x02)
        expectExchange(f.server, f.connection, "18 01", "01 18 1700 82")
        #expect(batches.count == 1)
        #expect(batches[0].map { "\($0.handle)@\($0.offset)=\($0.value.hexString)" } == ["0x0017@0=0102", "0x0017@2=0304"])
        expectExchange(f.server, f.connection, "0a 1e00", "0b 00000000")
        // Again, accepted: the stored part is written too.
        expectExchange(f.server, f.connection, "16 1700 0000 01", "17 1700 0000 01")
        expectExchange(f.server, f.connection, "16 1e00 0000 0707", "17 1e00 0000 0707")
        verdict = nil
        expectExchange(f.server, f.connection, "18 01", "19")
        expectExchange(f.server, f.connection, "0a 1e00", "0b 0707")
    }

    @Test("Answers after the connection closed are dropped")
    func lateAnswerAfterClose() {
        let f = Fixture()
        var respondLater: ((Result<[UInt8], ATTErrorCode>) -> Void)?
        f.server.onRead = { respondLater = $1 }
        var responses = 0
        f.server.handle(try! ATTPDU(decoding: [0x0A, 0x17, 0x00]), from: f.connection) { _ in responses += 1 }
        f.server.connectionClosed(f.connection)
        respondLater?(.success([1]))
        #expect(responses == 0)
    }
}

/// Answers the owner gives later, run after each request returns.
final class Deferred {
    var work: [() -> Void] = []
}

@Suite("GATT server: fuzz")
struct GATTServerFuzzTests {
    static let requestOpcodes: [UInt8] = [0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20, 0x52, 0xD2, 0x1E]

    /// Feeds `bytes` to the server; dynamic callbacks answer after the request returns, as an
    /// app on another queue would. Checks exactly one response per request, none per command.
    /// Returns whether the PDU reached the server.
    @discardableResult
    func feed(_ bytes: [UInt8], _ f: Fixture, _ deferred: Deferred, _ failures: inout [String]) -> Bool {
        // The bearer drops PDUs over ATT_MTU and answers undecodable ones itself.
        guard bytes.count <= f.connection.mtu, let pdu = try? ATTPDU(decoding: bytes) else { return false }
        var responses: [ATTPDU] = []
        if pdu.isCommand {
            f.server.handleCommand(pdu, from: f.connection)
        } else {
            f.server.handle(pdu, from: f.connection) { responses.append($0) }
        }
        while !deferred.work.isEmpty { deferred.work.removeFirst()() }
        if responses.count != (pdu.isCommand ? 0 : 1) { failures.append("\(responses.count) responses to \(bytes.hexString)") }
        for response in responses {
            if (try? ATTPDU(decoding: response.encode())) != response { failures.append("bad response \(response)") }
            if response.encode().count > f.connection.mtu { failures.append("response over MTU to \(bytes.hexString)") }
        }
        return true
    }

    @Test("Random request PDUs never crash and always get exactly one response", arguments: [23, 185, 517])
    func randomRequests(mtu: Int) {
        let f = Fixture(mtu: mtu)
        var rng = SeededGenerator(seed: 0x6A77_5E4F ^ UInt64(mtu))
        let deferred = Deferred()
        var answers = SeededGenerator(seed: 7)
        f.server.onRead = { request, respond in
            let value = [UInt8](repeating: 0x5A, count: Int.random(in: 0...600, using: &answers))
            let fails = Int.random(in: 0..<5, using: &answers) == 0
            deferred.work.append { respond(fails ? .failure(.unlikelyError) : .success(Array(value.prefix(512)))) }
        }
        f.server.onWrite = { _, respond in
            let fails = Bool.random(using: &answers)
            deferred.work.append { respond(fails ? .valueNotAllowed : nil) }
        }
        var failures: [String] = []
        var handled = 0
        for i in 0..<20_000 {
            var bytes = [Self.requestOpcodes.randomElement(using: &rng)!]
            // Small handles hit the database; the rest of the range tests bounds.
            for _ in 0..<Int.random(in: 0...8, using: &rng) {
                bytes.append(Bool.random(using: &rng) ? UInt8.random(in: 0...0x2A, using: &rng) : UInt8.random(in: 0...255, using: &rng))
            }
            if bytes.count > 4, Bool.random(using: &rng) { bytes[2] = 0; bytes[4] = 0 }
            if i % 97 == 0 { f.connection.securityLevel = [.noSecurity, .unauthenticatedEncryption, .authenticatedEncryption].randomElement(using: &rng)! }
            if feed(bytes, f, deferred, &failures) { handled += 1 }
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
        #expect(handled > 5_000)
    }

    @Test("Mutated conformance requests never crash and always get exactly one response")
    func mutatedRequests() {
        let seeds = ["10 0100 ffff 0028", "06 0100 ffff 0028 0d18", "08 1200 2400 0328", "04 0100 ffff", "0a 1500",
                     "0c 1500 1600", "0e 1000 1e00 2700", "20 1000 1500", "12 1c00 0100", "16 1e00 0000 0102", "18 01",
                     "52 1e00 aabb", "12 0b00 01"].map { [UInt8](hex: $0)! }
        let f = Fixture()
        var rng = SeededGenerator(seed: 0xF022)
        let deferred = Deferred()
        f.server.onRead = { request, respond in deferred.work.append { respond(.success([UInt8](repeating: 1, count: request.offset % 7))) } }
        f.server.onWrite = { _, respond in respond(nil) }
        var failures: [String] = []
        for _ in 0..<20_000 {
            var bytes = seeds.randomElement(using: &rng)!
            switch Int.random(in: 0..<4, using: &rng) {
            case 0: bytes[Int.random(in: 0..<bytes.count, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
            case 1: bytes.removeLast(Int.random(in: 0..<bytes.count, using: &rng))
            case 2: for _ in 0..<Int.random(in: 1...30, using: &rng) { bytes.append(UInt8.random(in: 0...255, using: &rng)) }
            default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 1...bytes.count, using: &rng))
            }
            feed(bytes, f, deferred, &failures)
        }
        #expect(failures.isEmpty, "\(failures.prefix(5))")
    }
}
