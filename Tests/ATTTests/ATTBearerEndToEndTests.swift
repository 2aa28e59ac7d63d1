import Foundation
import HCI
import HCITransport
import HostStack
import L2CAP
import Scheduling
import TestSupport
import Testing
import VirtualController
@testable import ATT

/// Two LE hosts on one virtual radio, connected, with an ATT bearer on each end of the link:
/// the central's is the client, the peripheral's the server. Runs on virtual time.
final class ConnectedBearers: LEHostDelegate, @unchecked Sendable {
    let loop = EventLoop(name: "radio", pacing: .manual)
    let central: LEHost
    let peripheral: LEHost
    private var connected: [LERole: LEConnection] = [:]
    private(set) var disconnected = 0
    static let peripheralAddress = LEAddress(.publicDevice, BluetoothAddress("C0:00:00:00:02:01")!)

    /// `snoop`: a capture of the central's HCI traffic.
    init(snoop: BtsnoopWriter? = nil) throws {
        let radio = VirtualRadio(loop: loop, seed: 23)
        var centralTransport = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:02:02")!).makeHostTransport()
        if let snoop { centralTransport = SnoopingTransport(wrapping: centralTransport, writer: snoop) }
        central = LEHost(transport: centralTransport, loop: loop)
        peripheral = LEHost(transport: VirtualController(radio: radio, address: Self.peripheralAddress.address,
                                                         position: RadioPosition(x: 2)).makeHostTransport(), loop: loop)
        central.delegate = self
        peripheral.delegate = self
        for host in [central, peripheral] { _ = try run { host.start(completion: $0) } }
    }

    func host(_ host: LEHost, didConnect connection: LEConnection) { connected[connection.role] = connection }
    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) { disconnected += 1 }

    /// Runs the loop until `body` completes and returns its result.
    @discardableResult
    func run<T, E: Error>(_ body: (@escaping (Result<T, E>) -> Void) -> Void) throws -> T {
        var result: Result<T, E>?
        body { result = $0 }
        loop.run(until: { result != nil }, timeout: .seconds(35))
        return try #require(result).get()
    }

    /// Advertises, connects, and puts a bearer on each side's ATT channel.
    func connect() throws -> (client: ATTBearer, server: ATTBearer, link: LEConnection) {
        try run { peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]), completion: $0) }
        try run { central.connect(to: Self.peripheralAddress, completion: $0) }
        loop.run(until: { self.connected.count == 2 }, timeout: .seconds(5))
        let c = try #require(connected[.central])
        let p = try #require(connected[.peripheral])
        // Let the data length update settle so long PDUs go in 251-octet link-layer packets.
        loop.run(for: .milliseconds(100))
        return (ATTBearer(channel: c.l2cap.att, loop: loop), ATTBearer(channel: p.l2cap.att, loop: loop), c)
    }
}

@Suite("ATT bearer across two hosts on the virtual radio")
struct ATTBearerEndToEndTests {
    /// MTU exchange, a request served later by the other side, a long read, a write command,
    /// notifications and an indication, then a disconnection that closes both bearers.
    func exchange(on pair: ConnectedBearers, clientMTU: Int, serverMTU: Int) throws {
        let (client, server, link) = try pair.connect()
        client.preferredMTU = clientMTU
        server.preferredMTU = serverMTU
        var serverMTUChanges: [Int] = []
        server.onMTUChanged = { serverMTUChanges.append($0) }
        let expectedMTU = min(clientMTU, serverMTU)

        #expect(try pair.run { client.exchangeMTU(completion: $0) } == expectedMTU)
        #expect(client.mtu == expectedMTU && server.mtu == expectedMTU)
        #expect(serverMTUChanges == (expectedMTU == ATTMTU.leDefault ? [] : [expectedMTU]))

        // The server answers a Read Request 50 ms later with a value that fills the MTU.
        let value = (0..<(expectedMTU - 1)).map { UInt8(truncatingIfNeeded: $0) }
        var commands: [ATTPDU] = []
        server.onCommand = { commands.append($0) }
        server.onRequest = { request, responder in
            switch request {
            case .readRequest(let read) where read.attributeHandle == 0x0003:
                pair.loop.schedule(after: .milliseconds(50)) { responder.respond(.readResponse(.init(attributeValue: value))) }
            case .readRequest(let read):
                responder.respondError(.invalidHandle, handle: read.attributeHandle)
            default:
                responder.respondError(.requestNotSupported)
            }
        }
        let read = try pair.run { client.request(.readRequest(.init(attributeHandle: 0x0003)), completion: $0) }
        #expect(read == .readResponse(.init(attributeValue: value)))
        #expect(throws: ATTBearerError.errorResponse(.init(requestOpcode: .readRequest, attributeHandle: 0x0009,
                                                             errorCode: .invalidHandle))) {
            try pair.run { client.request(.readRequest(.init(attributeHandle: 0x0009)), completion: $0) }
        }
        #expect(client.sendCommand(.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [0x01, 0x02]))))

        // Notifications arrive in order; the indication completes once the client confirmed it.
        var notified: [[UInt8]] = []
        var indicated: [[UInt8]] = []
        client.onNotification = { _, value in notified.append(value) }
        client.onIndication = { _, value in indicated.append(value) }
        for i: UInt8 in 1...3 { #expect(server.notify(handle: 0x0010, value: [i])) }
        try pair.run { server.indicate(handle: 0x0012, value: [0xAA, 0xBB], completion: $0) }
        #expect(notified == [[1], [2], [3]])
        #expect(indicated == [[0xAA, 0xBB]])
        #expect(commands == [.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [0x01, 0x02]))])

        // Disconnecting closes both bearers.
        var closes: [ATTBearer.CloseReason] = []
        client.onClose = { closes.append($0) }
        server.onClose = { closes.append($0) }
        pair.central.disconnect(link)
        pair.loop.run(until: { closes.count == 2 }, timeout: .seconds(2))
        #expect(closes == [.disconnected, .disconnected])
    }

    @Test(arguments: [(517, 247), (517, 517), (23, 517)])
    func requestsNotificationsAndIndicationsAcrossTheStack(clientMTU: Int, serverMTU: Int) throws {
        try exchange(on: ConnectedBearers(), clientMTU: clientMTU, serverMTU: serverMTU)
    }

    @Test func anUnansweredRequestClosesTheBearerAfter30Seconds() throws {
        let pair = try ConnectedBearers()
        let (client, server, _) = try pair.connect()
        var held: [ATTResponder] = []
        server.onRequest = { _, responder in held.append(responder) }
        var closed: ATTBearer.CloseReason?
        client.onClose = { closed = $0 }
        let start = pair.loop.now
        #expect(throws: ATTBearerError.timeout) {
            try pair.run { client.request(.readRequest(.init(attributeHandle: 0x0003)), completion: $0) }
        }
        #expect(pair.loop.now - start >= .seconds(30) && pair.loop.now - start < .seconds(31))
        #expect(closed == .transactionTimeout && held.count == 1)
    }

    @Test func writeCommandsStopWhenTheControllerQueueFillsAndResumeWhenItDrains() throws {
        let pair = try ConnectedBearers()
        let (client, server, _) = try pair.connect()
        client.maximumQueuedPDUsForUnacknowledged = 2
        var received: [UInt8] = []
        server.onCommand = { if case .writeCommand(let w) = $0 { received += w.attributeValue } }
        var ready = 0
        client.onReadyToSendCommands = { ready += 1 }
        // The controller takes 12 PDUs at once; then two wait in the driver, and the next is refused.
        var accepted: UInt8 = 0
        while accepted < 100, client.sendCommand(.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [accepted]))) {
            accepted += 1
        }
        #expect(accepted == 14)
        pair.loop.run(until: { ready > 0 }, timeout: .seconds(2))
        #expect(ready == 1)
        #expect(client.sendCommand(.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [accepted]))))
        pair.loop.run(until: { received.count == Int(accepted) + 1 }, timeout: .seconds(2))
        #expect(received == Array(0...accepted))
    }

    @Test func captureOfTheBearerExchangeDecodesInTshark() throws {
        let path = temporaryPath("att-bearer.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BtsnoopWriter(path: path)
        try exchange(on: ConnectedBearers(snoop: writer), clientMTU: 517, serverMTU: 247)
        writer.close()
        let records = try BtsnoopReader(path: path).records
        let result = try Tshark.check(capture: path)
        #expect(result.frameCount == records.count)
        #expect(result.frameProtocols.contains { $0.hasSuffix("btatt") })
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        #expect(result.expertErrors.isEmpty, "\(result.expertErrors)")
    }
}
