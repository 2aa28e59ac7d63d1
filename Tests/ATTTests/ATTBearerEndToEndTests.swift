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

@Suite("ATT bearer across two hosts on the virtual radio")
struct ATTBearerEndToEndTests {
    /// MTU exchange, a request served later by the other side, a long read, a write command,
    /// notifications and an indication, then a disconnection that closes both bearers.
    func exchange(on pair: ConnectedBearers, clientMTU: Int, serverMTU: Int) throws {
        let (client, server, link) = try pair.connect()
        client.preferredMTU = clientMTU
        server.preferredMTU = serverMTU
        let serverEvents = BearerEvents(server)
        let expectedMTU = min(clientMTU, serverMTU)

        #expect(try pair.run { client.exchangeMTU(completion: $0) } == expectedMTU)
        #expect(client.mtu == expectedMTU && server.mtu == expectedMTU)
        #expect(serverEvents.mtuChanges == (expectedMTU == ATTMTU.leDefault ? [] : [expectedMTU]))

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
        let events = BearerEvents(client, server)
        pair.central.disconnect(link)
        pair.loop.run(until: { events.closes.count == 2 }, timeout: .seconds(2))
        #expect(events.closes == [.disconnected, .disconnected])
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
        let events = BearerEvents(client)
        let start = pair.loop.now
        #expect(throws: ATTBearerError.timeout) {
            try pair.run { client.request(.readRequest(.init(attributeHandle: 0x0003)), completion: $0) }
        }
        #expect(pair.loop.now - start >= .seconds(30) && pair.loop.now - start < .seconds(31))
        #expect(events.closes == [.transactionTimeout] && held.count == 1)
    }

    @Test func writeCommandsStopWhenTheControllerQueueFillsAndResumeWhenItDrains() throws {
        let pair = try ConnectedBearers()
        let (client, server, _) = try pair.connect()
        client.maximumQueuedPDUsForUnacknowledged = 2
        var received: [UInt8] = []
        server.onCommand = { if case .writeCommand(let w) = $0 { received += w.attributeValue } }
        let events = BearerEvents(client)
        // The controller takes 12 PDUs at once; then two wait in the driver, and the next is refused.
        var accepted: UInt8 = 0
        while accepted < 100, client.sendCommand(.writeCommand(.init(attributeHandle: 0x0005, attributeValue: [accepted]))) {
            accepted += 1
        }
        #expect(accepted == 14)
        pair.loop.run(until: { events.ready > 0 }, timeout: .seconds(2))
        #expect(events.ready == 1)
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
