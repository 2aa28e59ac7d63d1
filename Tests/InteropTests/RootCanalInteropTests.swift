import Foundation
import HCI
import HCIDriver
import HCITransport
import HostStack
import Scheduling
import TestSupport
import Testing

/// Records what an LEHost reports, from any thread.
final class HostEvents: LEHostDelegate, @unchecked Sendable {
    let reports = Shared<[AdvertisingReport]>([])
    let connection = Shared<LEConnection?>(nil)
    let phy = Shared<HCIStatus?>(nil)
    let encryption = Shared<HCIStatus?>(nil)
    func host(_ host: LEHost, didDiscover report: AdvertisingReport) { reports.update { $0.append(report) } }
    func host(_ host: LEHost, didConnect connection: LEConnection) { self.connection.update { $0 = connection } }
    func host(_ host: LEHost, didUpdatePHYOf connection: LEConnection, status: HCIStatus) { phy.update { $0 = status } }
    func host(_ host: LEHost, encryptionChangedOn connection: LEConnection, status: HCIStatus) {
        encryption.update { $0 = status }
    }
}

/// Issue 5, scenario 3: our host on RootCanal (Google's controller) with a Bumble peer on the
/// same RootCanal radio: enhanced connection complete, a 2M PHY update, and encryption with a
/// key the test gives both sides. Real time.
@Suite("Interop: our host on RootCanal with a Bumble peer", .serialized)
struct RootCanalInteropTests {
    @Test func connectionPHYAndEncryptionOnRootCanal() throws {
        let ports = try (0..<4).map { _ in try freeLoopbackPort() }
        let rootCanal = try PeerProcess(script: "rootcanal_server.py", arguments: ports.map(String.init))
        var failed = true
        defer { rootCanal.stop(failed: failed) }
        #expect(rootCanal.waitFor("READY"))
        let key = (0..<16).map { UInt8(truncatingIfNeeded: $0 * 17 + 3) }
        let peer = try PeerProcess(script: "bumble_keyed_peripheral.py", arguments: [
            "tcp-client:127.0.0.1:\(ports[0])", "CanalPeer", "F0:C0:C0:C0:C0:01", key.map { String(format: "%02x", $0) }.joined(),
        ])
        defer { peer.stop(failed: failed) }
        #expect(peer.waitFor("ADVERTISING"))

        let capture = temporaryPath("rootcanal.btsnoop")
        defer { if failed { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) } }
        let writer = try BtsnoopWriter(path: capture)
        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        let transport = SnoopingTransport(wrapping: try TransportSpec(parsing: "tcp:127.0.0.1:\(ports[0])").makeExternalTransport(),
                                          writer: writer)
        let host = LEHost(transport: transport, loop: loop)
        let events = HostEvents()
        let started = Shared<Result<ControllerInfo, HCIError>?>(nil)
        loop.execute {
            host.delegate = events
            host.start { r in started.update { $0 = r } }
        }
        #expect(waitUntil(timeout: .seconds(15)) { started.value != nil })
        _ = try #require(started.value).get()

        // Scan until the peer's name shows, then connect.
        loop.execute { host.startScanning(active: true, filterDuplicates: true) { _ in } }
        #expect(waitUntil(timeout: .seconds(15)) {
            events.reports.value.contains { String(decoding: $0.data, as: UTF8.self).contains("CanalPeer") }
        })
        let report = try #require(events.reports.value.first { String(decoding: $0.data, as: UTF8.self).contains("CanalPeer") })
        loop.execute {
            host.stopScanning { _ in }
            host.connect(to: report.address) { _ in }
        }
        #expect(waitUntil(timeout: .seconds(15)) { events.connection.value != nil })
        let connection = try #require(events.connection.value)
        #expect(peer.waitFor("CONNECTED"))

        // 2M both ways.
        loop.execute { host.setPHY(connection, tx: [.le2M], rx: [.le2M]) }
        #expect(waitUntil(timeout: .seconds(15)) { events.phy.value != nil })
        #expect(events.phy.value == .success)
        let phys = Shared<(LEPHY, LEPHY)?>(nil)
        loop.execute { phys.update { $0 = (connection.txPHY, connection.rxPHY) } }
        #expect(waitUntil(timeout: .seconds(5)) { phys.value != nil })
        #expect(phys.value?.0 == .le2M && phys.value?.1 == .le2M)

        // Encryption with the key both sides were given.
        loop.execute { host.startEncryption(connection, longTermKey: key, rand: 0x1122_3344_5566_7788, ediv: 0x99AA) }
        #expect(waitUntil(timeout: .seconds(15)) { events.encryption.value != nil })
        #expect(events.encryption.value == .success)
        #expect(peer.waitFor("ENCRYPTED 1"))

        loop.execute { host.disconnect(connection) }
        #expect(peer.waitFor("DISCONNECTED"))
        let stopped = Shared(false)
        loop.execute { host.stop(); stopped.update { $0 = true } }
        _ = waitUntil(timeout: .seconds(5)) { stopped.value }
        writer.close()

        let result = try Tshark.check(capture: capture)
        #expect(result.malformedSent.isEmpty && result.malformedReceived.isEmpty, "\(result.malformed)")
        // RootCanal reports the connection with LE Enhanced Connection Complete.
        #expect(result.verboseOutput.contains("LE Enhanced Connection Complete"))
        #expect(result.verboseOutput.contains("LE PHY Update Complete"))
        failed = !result.malformed.isEmpty
    }
}
