import Foundation
import HCI
import HCIDriver
import HCITransport
import HostStack
import Scheduling
import TestSupport
import Testing
import VirtualController

/// Collects what an LEHost discovers, from any thread.
final class Discoveries: LEHostDelegate, @unchecked Sendable {
    let reports = Shared<[AdvertisingReport]>([])
    func host(_ host: LEHost, didDiscover report: AdvertisingReport) { reports.update { $0.append(report) } }
    func names() -> [String] {
        reports.value.compactMap { r -> String? in
            // Complete Local Name AD structures.
            var i = 0
            while i + 1 < r.data.count {
                let length = Int(r.data[i])
                guard length > 0, i + 1 + length <= r.data.count else { break }
                if r.data[i + 1] == 0x09 { return String(decoding: r.data[(i + 2)..<(i + 1 + length)], as: UTF8.self) }
                i += 1 + length
            }
            return nil
        }
    }
}

/// Our stack against Bumble (PyPI `bumble==0.0.236`), an independent implementation.
@Suite("Interop with Bumble", .serialized)
struct BumbleInteropTests {
    /// Runs `body` with a started LEHost over H4/TCP to `port`, on a real-time loop.
    func withHost(port: UInt16, snoop: BtsnoopWriter?, _ body: (LEHost, Discoveries) throws -> Void) throws {
        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        // The path CB_TRANSPORT=tcp:… takes.
        var transport = try TransportSpec(parsing: "tcp:127.0.0.1:\(port)").makeExternalTransport()
        if let snoop { transport = SnoopingTransport(wrapping: transport, writer: snoop) }
        let host = LEHost(transport: transport, loop: loop)
        let discoveries = Discoveries()
        let started = Shared<Result<ControllerInfo, HCIError>?>(nil)
        loop.execute {
            host.delegate = discoveries
            host.start { r in started.update { $0 = r } }
        }
        #expect(waitUntil(timeout: .seconds(15)) { started.value != nil })
        _ = try #require(started.value).get()
        try body(host, discoveries)
        let stopped = Shared(false)
        loop.execute { host.stop(); stopped.update { $0 = true } }
        _ = waitUntil(timeout: .seconds(5)) { stopped.value }
    }

    @Test func ourHostInitialisesAgainstABumbleControllerAndScans() throws {
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))
        let advertiser = try PeerProcess(script: "bumble_advertiser.py",
                                         arguments: ["tcp-client:127.0.0.1:\(ports[1])", "BumbleEcho", "F0:F1:F2:F3:F4:F5"])
        defer { advertiser.stop(failed: failed) }
        #expect(advertiser.waitFor("ADVERTISING"))

        let capture = temporaryPath("bumble-scan.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let writer = try BtsnoopWriter(path: capture)
        try withHost(port: ports[0], snoop: writer) { host, discoveries in
            // Bumble's controller has no extended advertising commands: the host uses legacy ones,
            // and gets extended reports back (a quirk it must survive).
            #expect(!host.usesExtendedCommands)
            let scanning = Shared<Result<Void, HCIError>?>(nil)
            host.loop.execute { host.startScanning(active: true, filterDuplicates: false) { r in scanning.update { $0 = r } } }
            #expect(waitUntil(timeout: .seconds(10)) { scanning.value != nil })
            try #require(scanning.value).get()
            #expect(waitUntil(timeout: .seconds(10)) { discoveries.names().contains("BumbleEcho") })
            #expect(discoveries.reports.value.contains { $0.address.address == BluetoothAddress("F0:F1:F2:F3:F4:F5") })
        }
        writer.close()
        let result = try Tshark.check(capture: capture)
        #expect(result.frameCount > 10)
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        failed = false
    }

    @Test func bumblesHostDrivesOurVirtualController() throws {
        // Our radio: an advertiser of ours, and a controller served over H4/TCP to Bumble's host.
        let radio = VirtualRadio(loop: EventLoop(name: "radio", pacing: .realTime), seed: 9)
        defer { radio.loop.shutdown() }
        let served = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:B0:01")!)
        let server = try H4TCPServer(host: "127.0.0.1", port: 0) { transport in served.attachHost(transport) }
        defer { server.close() }
        let advertiser = LEHost(transport: VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:B0:02")!)
            .makeHostTransport(), loop: radio.loop)
        let advertising = Shared<Result<Void, HCIError>?>(nil)
        radio.loop.execute {
            advertiser.start { _ in
                advertiser.startAdvertising(AdvertisingParameters(
                    data: [0x02, 0x01, 0x06, 0x09, 0x09] + Array("SwiftAdv".utf8))) { r in advertising.update { $0 = r } }
            }
        }
        #expect(waitUntil(timeout: .seconds(10)) { advertising.value != nil })
        try #require(advertising.value).get()

        let scanner = try PeerProcess(script: "bumble_scanner.py", arguments: ["tcp-client:127.0.0.1:\(server.port)", "3"])
        var failed = true
        defer { scanner.stop(failed: failed) }
        #expect(scanner.waitFor("DONE", timeout: .seconds(30)))
        #expect(scanner.text.contains("FOUND C0:00:00:00:B0:02") && scanner.text.contains("SwiftAdv"))
        failed = !scanner.text.contains("SwiftAdv")
    }
}
