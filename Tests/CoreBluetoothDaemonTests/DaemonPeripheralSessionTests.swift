import ATT
import AssignedNumbers
import CoreBluetoothDaemon
import DaemonProtocol
import GATT
import HCI
import HostDevice
import Testing

@Suite("corebluetoothd: peripheral sessions")
struct DaemonPeripheralSessionTests {
    /// A client that said hello and opened peripheral session 1.
    func peripheralClient(_ bench: DaemonBench, _ name: String) throws -> (DaemonClient, Inbox) {
        let inbox = Inbox()
        let client = DaemonClient(device: bench.daemonDevice, name: name) { inbox.take($0) }
        try client.receive(.hello(version: 1, minimumVersion: 1, name: name))
        try client.receive(.openPeripheral(session: 1, restoreIdentifier: nil))
        #expect(inbox.messages.last == .state(session: 1, state: 5, reason: nil))
        return (client, inbox)
    }

    func service(_ uuid: UInt16) -> GATTService {
        GATTService(uuid: BluetoothUUID(uuid16: uuid), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: uuid + 1), properties: [.read, .write, .notify],
                               permissions: [.readable, .writeable], value: .dynamic),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: uuid + 2), properties: [.read], permissions: [.readable],
                               value: .stored([7, 8]), descriptors: [.userDescription("static")]),
        ])
    }

    func published(_ inbox: Inbox, key: UInt32) -> GATTServiceHandles? {
        inbox.first { if case .published(1, key, .success(let handles)) = $0 { handles } else { nil } }
    }

    @Test func eachClientsServicesJoinTheOneDatabaseAndLeaveItWithTheirClient() throws {
        let bench = try DaemonBench()
        let (one, oneInbox) = try peripheralClient(bench, "one")
        let (two, twoInbox) = try peripheralClient(bench, "two")
        try one.receive(.publish(session: 1, key: 1, includedKeys: [], service: service(0xBB00)))
        try two.receive(.publish(session: 1, key: 1, includedKeys: [], service: service(0xCC00)))
        let oneHandles = try #require(published(oneInbox, key: 1))
        let twoHandles = try #require(published(twoInbox, key: 1))
        #expect(oneHandles.characteristics.count == 2 && twoHandles.characteristics.count == 2)
        #expect(oneHandles.range.upperBound < twoHandles.range.lowerBound)
        let server = bench.daemonDevice.gattServer
        #expect(server.storedValue(for: oneHandles.characteristics[1].value) == [7, 8])
        // A service that includes one published under another key, and one that names none.
        try one.receive(.publish(session: 1, key: 2, includedKeys: [1], service: GATTService(uuid: BluetoothUUID(uuid16: 0xBB10))))
        #expect(published(oneInbox, key: 2)?.includes.count == 1)
        try one.receive(.publish(session: 1, key: 3, includedKeys: [9], service: GATTService(uuid: BluetoothUUID(uuid16: 0xBB20))))
        #expect(oneInbox.messages.last == .published(session: 1, key: 3, result: .failure(.includedServiceNotPublished(key: 9))))
        try one.receive(.unpublish(session: 1, key: 1))
        #expect(oneInbox.messages.last == .unpublished(session: 1, key: 1, error: .included(byKey: 2)))

        // One goes (its socket closed): its services leave the database, two's stay.
        one.close()
        #expect(server.handles(of: oneHandles.id) == nil)
        #expect(server.handles(of: twoHandles.id) == twoHandles)
        // Two unpublishes its own.
        try two.receive(.unpublishAll(session: 1))
        #expect(twoInbox.messages.last == .unpublished(session: 1, key: 1, error: nil))
        #expect(server.handles(of: twoHandles.id) == nil)
    }

    @Test func advertisingFromTwoClientsUsesTwoSetsAndStopsWithTheClient() throws {
        let bench = try DaemonBench()
        let (one, oneInbox) = try peripheralClient(bench, "one")
        let (two, twoInbox) = try peripheralClient(bench, "two")
        let advertisement = DaemonAdvertisement(name: "one", serviceUUIDs: [BluetoothUUID(uuid16: 0xBB00)], manufacturerData: nil, raw: nil)
        try one.receive(.startAdvertising(session: 1, advertisement: advertisement))
        try two.receive(.startAdvertising(session: 1, advertisement: DaemonAdvertisement(
            name: "two", serviceUUIDs: [], manufacturerData: nil, raw: nil)))
        #expect(bench.run { oneInbox.messages.contains(.advertisingStarted(session: 1, error: nil, isOn: true)) })
        #expect(bench.run { twoInbox.messages.contains(.advertisingStarted(session: 1, error: nil, isOn: true)) })
        #expect(bench.daemonDevice.host.advertisingSets.count == 2)
        one.close()
        #expect(bench.run { bench.daemonDevice.host.advertisingSets.count == 1 })
        try two.receive(.stopAdvertising(session: 1))
        #expect(twoInbox.messages.last == .advertisingStopped(session: 1))
        #expect(bench.run { bench.daemonDevice.host.advertisingSets.isEmpty })
    }
}
