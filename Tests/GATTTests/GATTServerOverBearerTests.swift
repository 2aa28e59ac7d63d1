import ATT
import AssignedNumbers
import Foundation
import GATT
import HCITransport
import TestSupport
import Testing

/// The GATT server served over a real ATT bearer, across two hosts on the virtual radio,
/// exercised by raw ATT requests from the other side.
@Suite("GATT server over the ATT bearer")
struct GATTServerOverBearerTests {
    static let heartRate = BluetoothUUID(uuid16: 0x180D)
    static let measurement = BluetoothUUID(uuid16: 0x2A37)
    static let location = BluetoothUUID(uuid16: 0x2A38)

    @Test func discoverReadSubscribeAndNotifyAcrossTheStack() throws {
        let capture = temporaryPath("gatt-server.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let writer = try BtsnoopWriter(path: capture)
        let pair = try ConnectedBearers(snoop: writer)
        let (client, server, _) = try pair.connect()
        let gatt = GATTServer(deviceName: "Swift HRM", appearance: 0x0341)
        let service = try gatt.addService(GATTService(uuid: Self.heartRate, characteristics: [
            GATTCharacteristic(uuid: Self.measurement, properties: [.notify], permissions: [], value: .dynamic),
            GATTCharacteristic(uuid: Self.location, properties: [.read], permissions: [.readable], value: .stored([0x01])),
        ]))
        gatt.attach(server)
        #expect(try pair.run { client.exchangeMTU(completion: $0) } == 517)

        // Discover All Primary Services: GAP, GATT and Heart Rate in one response at MTU 517.
        let services = try pair.run { client.request(.readByGroupTypeRequest(.init(
            startingHandle: 0x0001, endingHandle: 0xFFFF, attributeGroupType: .primaryService)), completion: $0) }
        guard case .readByGroupTypeResponse(let list) = services else { Issue.record("got \(services)"); return }
        let uuids = list.attributeData.compactMap { BluetoothUUID(littleEndian: $0.value) }
        #expect(uuids == [.genericAccessService, .genericAttributeService, Self.heartRate])

        // Read the Body Sensor Location value.
        let location = service.characteristics[1].value
        let read = try pair.run { client.request(.readRequest(.init(attributeHandle: location)), completion: $0) }
        #expect(read == .readResponse(.init(attributeValue: [0x01])))

        // Subscribe through the CCCD, then a notification reaches the client.
        let measurement = service.characteristics[0]
        let cccd = try #require(measurement.clientConfiguration)
        var notifications: [(ATTHandle, [UInt8])] = []
        client.onNotification = { notifications.append(($0, $1)) }
        let written = try pair.run { client.request(.writeRequest(.init(attributeHandle: cccd, attributeValue: [0x01, 0x00])), completion: $0) }
        #expect(written == .writeResponse(.init()))
        #expect(gatt.updateValue([0x06, 72], forCharacteristic: measurement.value))
        pair.loop.run(until: { !notifications.isEmpty }, timeout: .seconds(1))
        #expect(notifications.first?.0 == measurement.value && notifications.first?.1 == [0x06, 72])

        // A write to a read-only characteristic: Write Not Permitted, on the wire.
        #expect(throws: ATTBearerError.self) {
            try pair.run { client.request(.writeRequest(.init(attributeHandle: location, attributeValue: [2])), completion: $0) }
        }
        writer.close()
        let result = try Tshark.check(capture: capture)
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        #expect(result.expertErrors.isEmpty, "\(result.expertErrors)")
    }
}
