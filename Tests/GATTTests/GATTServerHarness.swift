import ATT
import AssignedNumbers
import ByteCoding
import GATT
import HCI
import L2CAP
import Scheduling
import Testing

/// A bearer double: records what the server sends, refuses notifications on demand, and
/// holds indications until the test confirms them.
final class FakeConnection: GATTServerConnection {
    var mtu: Int
    var securityLevel: LESecurityLevel = .noSecurity
    var hasEncryptionKey = false
    /// Notifications it takes before refusing, as a full send queue does.
    var room = Int.max
    /// Notifications and indications as wire bytes, in order.
    var sent: [[UInt8]] = []
    private var confirmations: [(Bool) -> Void] = []

    init(mtu: Int = ATTMTU.leDefault) { self.mtu = mtu }

    func notify(handle: ATTHandle, bytes: UnsafeRawBufferPointer) -> Bool {
        guard room > 0 else { return false }
        room -= 1
        let value = Array(bytes.prefix(ATTMTU.maximumNotificationValueLength(mtu: mtu)))
        sent.append(ATTPDU.handleValueNotification(.init(attributeHandle: handle, attributeValue: value)).encode())
        return true
    }

    func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Bool) -> Void) {
        let value = Array(value.prefix(ATTMTU.maximumNotificationValueLength(mtu: mtu)))
        sent.append(ATTPDU.handleValueIndication(.init(attributeHandle: handle, attributeValue: value)).encode())
        confirmations.append(completion)
    }

    var unconfirmedIndications: Int { confirmations.count }

    /// The client's Handle Value Confirmation for the oldest indication.
    func confirm(_ confirmed: Bool = true) {
        confirmations.removeFirst()(confirmed)
    }
}

/// An ATT channel double under a real `ATTBearer`: records the SDUs the bearer sends, delivers
/// what the test says the client sent, and has a link queue depth the test sets.
final class FakeATTChannel: ATTChannel {
    var sent: [[UInt8]] = []
    var onReceive: ((consuming [UInt8]) -> Void)?
    var onClose: (() -> Void)?
    var onCanSendMore: (() -> Void)?
    var queuedPDUs = 0
    var securityLevel = LESecurityLevel.noSecurity

    func send(_ sdu: [UInt8]) -> Bool {
        sent.append(sdu)
        return true
    }
}

/// One client of a `GATTServer` as the product serves it: the server attached to a real
/// `ATTBearer` (on a fake channel), so requests, notifications, indications, confirmations,
/// back-pressure and the close all go through the bearer and its listeners.
final class BearerClient {
    let channel = FakeATTChannel()
    let bearer: ATTBearer
    let connection: GATTBearerConnection

    init(_ server: GATTServer, loop: EventLoop) {
        bearer = ATTBearer(channel: channel, loop: loop)
        connection = server.attach(bearer)
    }

    /// The client sends `hex`; returns everything the bearer sent since the last look.
    @discardableResult
    func send(_ hex: String) -> [String] {
        channel.onReceive?([UInt8](hex: hex)!)
        return takeSent()
    }

    /// What the bearer sent since the last look, as hex.
    func takeSent() -> [String] {
        defer { channel.sent = [] }
        return channel.sent.map(\.hexString)
    }

    /// The client's Handle Value Confirmation.
    func confirm() { channel.onReceive?([0x1E]) }

    /// The link's queue is at the bearer's bound: notifications are refused.
    func fillLinkQueue() { channel.queuedPDUs = bearer.maximumQueuedPDUsForUnacknowledged }

    /// The link's queue drained.
    func drainLinkQueue() {
        channel.queuedPDUs = 0
        channel.onCanSendMore?()
    }

    /// The link went down.
    func disconnect() { channel.onClose?() }
}

/// Feeds request bytes to the server as a bearer would and collects the response bytes.
/// Undecodable PDUs get Invalid PDU here (that is the bearer's rule, not the server's).
@discardableResult
func exchange(_ server: GATTServer, _ connection: FakeConnection, _ requestHex: String) -> [[UInt8]] {
    let bytes = [UInt8](hex: requestHex)!
    return exchange(server, connection, bytes)
}

func exchange(_ server: GATTServer, _ connection: FakeConnection, _ bytes: [UInt8]) -> [[UInt8]] {
    var responses: [[UInt8]] = []
    guard let pdu = try? ATTPDU(decoding: bytes) else {
        let opcode = ATTOpcode(bytes.first ?? 0)
        return [ATTPDU.errorResponse(.init(requestOpcode: opcode, attributeHandle: .invalid, errorCode: .invalidPDU)).encode()]
    }
    if pdu.isCommand {
        server.handleCommand(pdu, from: connection)
    } else {
        server.handle(pdu, from: connection) { responses.append($0.encode()) }
    }
    return responses
}

/// `hex` without its spaces, as `hexString` writes.
func hx(_ hex: String) -> String { hex.filter { $0 != " " } }

/// The octets of `range`, as hex.
func hexRange(_ range: Range<UInt8>) -> String { [UInt8](range).hexString }

/// One scripted step: `request` in, exactly `response` out (nil: nothing, for commands and
/// answers still pending).
func expectExchange(_ server: GATTServer, _ connection: FakeConnection, _ request: String, _ response: String?,
                    sourceLocation: SourceLocation = #_sourceLocation) {
    let responses = exchange(server, connection, request)
    let expected = response.map { [[UInt8](hex: $0)!] } ?? []
    #expect(responses.map(\.hexString) == expected.map(\.hexString), "request \(request)", sourceLocation: sourceLocation)
}

/// The database every conformance test runs against. Handles, as the server allocates them
/// (GAP and GATT first, then services in the order added, each contiguous):
///
///     0x0001 Primary Service 0x1800 (GAP)                       … 0x0005
///     0x0002   Characteristic: read, 0x0003, Device Name 0x2A00
///     0x0003     "Test"
///     0x0004   Characteristic: read, 0x0005, Appearance 0x2A01
///     0x0005     0x0340 (Generic Heart Rate Sensor)
///     0x0006 Primary Service 0x1801 (GATT)                      … 0x000D
///     0x0007   Characteristic: indicate, 0x0008, Service Changed 0x2A05
///     0x0008     (not readable)
///     0x0009     CCCD
///     0x000A   Characteristic: read|write, 0x000B, Client Supported Features 0x2B29
///     0x000B     per connection
///     0x000C   Characteristic: read, 0x000D, Database Hash 0x2B2A
///     0x000D     hash
///     0x000E Secondary Service 0x180F (B)                       … 0x0011
///     0x000F   Characteristic: read|notify (0x12), 0x0010, 0x2A19
///     0x0010     0x64, readable
///     0x0011     CCCD
///     0x0012 Primary Service 0x180D (A)                         … 0x0024
///     0x0013   Include 0x000E…0x0011, 0x180F
///     0x0014   Characteristic: read (0x02), 0x0015, 0x2A38
///     0x0015     40 octets 0x00…0x27, readable
///     0x0016   Characteristic: read|write|extended (0x8A), 0x0017, 0x2A39
///     0x0017     dynamic, readable|writeable
///     0x0018     Extended Properties: Reliable Write (0x0001)
///     0x0019     User Description "Control"
///     0x001A   Characteristic: notify|indicate (0x30), 0x001B, 0x2A3A
///     0x001B     0x01, readable
///     0x001C     CCCD
///     0x001D   Characteristic: read|write (0x0A), 0x001E, 0x2A3B
///     0x001E     00 00 00 00, readable|writeable
///     0x001F   Characteristic: read (0x02), 0x0020, 0x2A3C
///     0x0020     0x55, read needs encryption
///     0x0021   Characteristic: write (0x08), 0x0022, 0x2A3D
///     0x0022     0x00, writeable only
///     0x0023   Characteristic: read|write (0x0A), 0x0024, 0x2A3E
///     0x0024     0x00, read and write need authentication
///     0x0025 Primary Service 12345678-1234-5678-1234-56789ABCDEF0 (C) … 0x0027
///     0x0026   Characteristic: read (0x02), 0x0027, 12345678-1234-5678-1234-56789ABCDEF1
///     0x0027     "hi"
struct Fixture {
    static let serviceC = BluetoothUUID("12345678-1234-5678-1234-56789ABCDEF0")!
    static let characteristicC = BluetoothUUID("12345678-1234-5678-1234-56789ABCDEF1")!
    /// The two UUIDs little-endian, as ATT carries them.
    static let serviceCHex = "f0debc9a785634127856341278563412"
    static let characteristicCHex = "f1debc9a785634127856341278563412"

    let server = GATTServer(deviceName: "Test", appearance: 0x0340)
    let connection: FakeConnection
    let serviceB: GATTServiceHandles
    let serviceA: GATTServiceHandles
    let serviceC: GATTServiceHandles

    init(mtu: Int = ATTMTU.leDefault) {
        connection = FakeConnection(mtu: mtu)
        serviceB = try! server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180F), isPrimary: false, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A19), properties: [.read, .notify], permissions: .readable,
                               value: .stored([0x64])),
        ]))
        serviceA = try! server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180D), includedServices: [serviceB.id], characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: .read, permissions: .readable,
                               value: .stored(Array(0..<40))),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A39), properties: [.read, .write], extendedProperties: .reliableWrite,
                               permissions: [.readable, .writeable], value: .dynamic,
                               descriptors: [.userDescription("Control")]),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A3A), properties: [.notify, .indicate], permissions: .readable,
                               value: .stored([0x01])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A3B), properties: [.read, .write], permissions: [.readable, .writeable],
                               value: .stored([0, 0, 0, 0])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A3C), properties: .read, permissions: .readEncryptionRequired,
                               value: .stored([0x55])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A3D), properties: .write, permissions: .writeable,
                               value: .stored([0x00])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A3E), properties: [.read, .write],
                               permissions: [.readAuthenticationRequired, .writeAuthenticationRequired], value: .stored([0x00])),
        ]))
        serviceC = try! server.addService(GATTService(uuid: Self.serviceC, characteristics: [
            GATTCharacteristic(uuid: Self.characteristicC, properties: .read, permissions: .readable, value: .stored(Array("hi".utf8))),
        ]))
    }
}
