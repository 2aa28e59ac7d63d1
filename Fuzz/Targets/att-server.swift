// The GATT server answering arbitrary requests (Vol 3 Part G over Part F): a database with
// stored and dynamic values, long values, descriptors, notify/indicate characteristics, an
// included and a secondary service, served on a real ATT bearer over a channel double. The
// input is the client's PDUs, with time passing (indication timeouts), value updates, link
// queue pressure and security changes in between.
import ATT
import ATTTesting
import AssignedNumbers
import GATT
import HCI
import Scheduling

final class Pending {
    var reads: [(Result<[UInt8], ATTErrorCode>) -> Void] = []
    var writes: [(ATTErrorCode?) -> Void] = []
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let loop = EventLoop(pacing: .manual)
    let server = GATTServer(deviceName: "Fuzz", appearance: 0x0341)
    let setup = input.u8()
    server.preparedWriteLimit = Int(setup & 0x0F)
    server.indicationWindow = Int(setup >> 4 & 3) + 1
    let long = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
    guard let secondary = try? server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180F), isPrimary: false, characteristics: [
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A19), properties: [.read, .notify], permissions: [.readable], value: .stored([90])),
    ])), let main = try? server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180D), includedServices: [secondary.id], characteristics: [
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), properties: [.notify, .indicate], permissions: [], value: .dynamic),
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: [.read, .write, .writeWithoutResponse],
                           extendedProperties: [.reliableWrite], permissions: [.readable, .writeable], value: .stored(long),
                           descriptors: [.userDescription("a long value"), .presentationFormat(format: 4, unit: 0x2700)]),
        GATTCharacteristic(uuid: BluetoothUUID("12345678-1234-5678-1234-56789ABCDEF0")!, properties: [.read, .write],
                           permissions: [.readable, .writeable, .readEncryptionRequired, .writeAuthenticationRequired], value: .dynamic),
        GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A39), properties: [.write, .authenticatedSignedWrites],
                           permissions: [.writeable], value: .dynamic),
    ])) else { return 0 }
    let pending = Pending()
    server.onRead = { request, respond in
        if request.handle.rawValue & 1 == 0 { respond(.success(Array(long.prefix(request.offset + 40)))) } else { pending.reads.append(respond) }
    }
    server.onWrite = { _, respond in pending.writes.append(respond) }
    let channel = FakeATTChannel()
    let bearer = ATTBearer(channel: channel, loop: loop)
    bearer.preferredMTU = setup & 0x40 == 0 ? 23 : 517
    let connection = server.attach(bearer)
    let notifying = main.characteristics[0].value
    while !input.isEmpty {
        let op = input.u8()
        switch op & 7 {
        case 0, 1, 2, 3:
            channel.onReceive?(input.record())
        case 4:
            loop.run(for: .seconds(Int64(op >> 3)))
        case 5:
            _ = server.updateValue(input.record(), forCharacteristic: op & 8 == 0 ? notifying : secondary.characteristics[0].value)
        case 6:
            channel.queuedPDUs = Int(op >> 3)
            channel.onCanSendMore?()
        default:
            channel.securityLevel = LESecurityLevel(rawValue: Int(op >> 3) % 4 + 1) ?? .noSecurity
            connection.hasEncryptionKey = op & 0x80 != 0
            // Answer what the app held back, in the order asked.
            if !pending.reads.isEmpty { pending.reads.removeFirst()(op & 8 == 0 ? .success([1, 2]) : .failure(ATTErrorCode(0x80))) }
            if !pending.writes.isEmpty { pending.writes.removeFirst()(op & 0x10 == 0 ? nil : ATTErrorCode(0x81)) }
        }
        channel.sent.removeAll(keepingCapacity: true)
    }
    loop.run(for: .seconds(60))
    channel.onClose?()
    loop.runUntilIdle()
    // Requests the app held back and never answered: their responders hold the server, and the
    // handlers holding them are the server's (a cycle of this harness, which LeakSanitizer
    // reported: an app answers or drops them).
    pending.reads.removeAll()
    pending.writes.removeAll()
    return 0
}
