import Foundation
import Glibc
import HCI
import HCITransport
import Scheduling
import TestSupport
import Testing
@testable import CoreBluetooth

/// A TCP controller that accepts the connection, never answers and never reads: the host's
/// socket fills up, yet its loop keeps running, so the 5 s HCI command timeout fires and the
/// manager reports the device unusable with the reason. The device runs on a virtual radio's
/// loop (the external-device test seam), so the 5 s pass in virtual time.
@Suite(.timeLimit(.minutes(1)))
struct StalledControllerTests {
    /// The host's transport to the stalled controller: opens a real `TCPTransport`, then
    /// floods it so that the socket is full before the host sends its first command.
    private final class FloodingTransport: HCITransport, @unchecked Sendable {
        // Set before the manager starts, read after: no concurrent access.
        let tcp: TCPTransport
        let floodBytes: Int
        let queuedAtClose = Locked<Int?>(nil)

        init(port: UInt16, floodBytes: Int) {
            tcp = TCPTransport(host: "127.0.0.1", port: port, outboundLimit: 2 * floodBytes)
            self.floodBytes = floodBytes
        }

        func open(on loop: EventLoop, sink: HCIPacketSink) throws {
            try tcp.open(on: loop, sink: sink)
            // Vendor commands the controller would have to read before anything else.
            let filler = HCIPacket.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0xFC00),
                                                            parameters: [UInt8](repeating: 0xAA, count: 252)))
            for _ in 0..<(floodBytes / 256) { tcp.send(filler) }
        }

        func send(_ packet: HCIPacket) { tcp.send(packet) }

        func close() {
            queuedAtClose.withLock { $0 = $0 ?? tcp.pendingOutputByteCount }
            tcp.close()
        }
    }

    private final class StateDelegate: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
        let log = EventLog()
        func centralManagerDidUpdateState(_ central: CBCentralManager) { log.append("central \(central.state.rawValue)") }
    }

    @Test func aControllerThatStopsReadingTimesOutAndTheManagerSaysWhy() throws {
        let server = try StalledServer()
        defer { server.close() }
        let radio = CBVirtualRadio(clock: .virtual)
        // More than the socket takes: the kernel grows a TCP send buffer up to tcp_wmem's
        // maximum (4 MiB by default), even toward a closed window.
        let floodBytes = 6 << 20
        let transport = FloodingTransport(port: server.port, floodBytes: floodBytes)
        let override = ExternalDeviceOverride(radio: radio) { _ in transport }
        let delegate = StateDelegate()
        let bonds = temporaryPath("bonds")
        defer { try? FileManager.default.removeItem(atPath: bonds) }
        let start = radio.now
        let central = CBCentralManager(delegate: delegate, queue: nil, options: [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(server.port)", LocalDevice.overrideOptionKey: override,
            CBManagerOptionLinuxBondDirectoryKey: bonds,
        ])
        // The connection is made on the transport's thread; the radio's clock waits meanwhile.
        let connection = try server.accept()
        defer { close(connection) }
        // Connected, part of the flood in the socket, the rest (and Reset) queued: it is full.
        #expect(waitUntil { (1..<floodBytes).contains(transport.tcp.pendingOutputByteCount) })

        #expect(radio.run(until: { delegate.log.contains("central 2") }, timeout: .seconds(20)))
        #expect(delegate.log.all == ["central 2"])
        #expect(central.state == .unsupported)
        // Reset timed out after 5 s of the loop's time, with the socket still full.
        #expect(radio.now - start >= .seconds(5))
        #expect(radio.now - start < .seconds(10))
        let reason = try #require(central.linuxUnavailableReason)
        #expect(reason.contains("Reset timed out: the controller never answered"), "\(reason)")
        #expect((transport.queuedAtClose.current ?? 0) > 0)
    }
}
