import Foundation
import HCI
import HCIDriver
import HCITransport
import HostStack
import Scheduling
import TestSupport
import Testing

/// Records the connections and failed attempts an LEHost reports, from any thread.
final class ConnectAttempts: LEHostDelegate, @unchecked Sendable {
    // @unchecked: every field is a Shared (locked).
    let connected = Shared<[LEConnection]>([])
    let failed = Shared<[(LEAddress, HCIStatus)]>([])
    func host(_ host: LEHost, didConnect connection: LEConnection) { connected.update { $0.append(connection) } }
    func host(_ host: LEHost, didFailToConnectTo peer: LEAddress, status: HCIStatus) { failed.update { $0.append((peer, status)) } }
}

/// Bumble's controller (0.0.236) answers LE Create Connection Cancel with success but never
/// sends the LE Connection Complete (Unknown Connection Identifier) the spec requires, and goes
/// on initiating. Our host ends the attempt itself after `LEHost.cancelCompletionGrace`; the
/// controller refuses another attempt until the old one connects, and that late link reaches
/// the host. Real time.
@Suite("Interop: Bumble's LE Create Connection Cancel", .serialized)
struct CancelQuirkInteropTests {
    @Test func aCancelBumbleNeverCompletesEndsAfterTheGraceAndItsLateLinkArrives() throws {
        let ports = try (0..<3).map { _ in try freeLoopbackPort() }
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))
        let present = LEAddress(.randomDevice, BluetoothAddress("F0:F1:F2:F3:F4:E1")!)
        let late = LEAddress(.randomDevice, BluetoothAddress("F0:F1:F2:F3:F4:E2")!)
        let advertiser = try PeerProcess(script: "bumble_advertiser.py",
                                         arguments: ["tcp-client:127.0.0.1:\(ports[1])", "Present", "\(present.address)"])
        defer { advertiser.stop(failed: failed) }
        #expect(advertiser.waitFor("ADVERTISING"))

        let loop = EventLoop(name: "host", pacing: .realTime)
        defer { loop.shutdown() }
        let host = LEHost(transport: try TransportSpec(parsing: "tcp:127.0.0.1:\(ports[0])").makeExternalTransport(), loop: loop)
        let events = ConnectAttempts()
        let started = Shared<Result<ControllerInfo, HCIError>?>(nil)
        loop.execute {
            host.delegate = events
            host.start { r in started.update { $0 = r } }
        }
        #expect(waitUntil(timeout: .seconds(15)) { started.value != nil })
        _ = try #require(started.value).get()
        let random = LEHost.staticRandomAddress(from: BluetoothAddress("B0:00:00:00:00:01")!)
        let addressSet = Shared<Result<Void, HCIError>?>(nil)
        loop.execute { host.setRandomAddress(random) { r in addressSet.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(5)) { addressSet.value != nil })

        // An attempt to a peer nobody is, cancelled: Bumble says success and nothing more.
        let accepted = Shared<Result<Void, HCIError>?>(nil)
        loop.execute { host.connect(to: late, ownRandomAddress: true) { r in accepted.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(5)) { accepted.value != nil })
        #expect((try? accepted.value?.get()) != nil)
        let cancelled = Shared<Result<Void, HCIError>?>(nil)
        let cancelledAt = ContinuousClock.now
        loop.execute { host.cancelConnecting { r in cancelled.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(5)) { cancelled.value != nil })
        #expect((try? cancelled.value?.get()) != nil)
        // Our host ends the attempt after the grace, as the missing event would have.
        #expect(waitUntil(timeout: .seconds(10)) { !events.failed.value.isEmpty })
        #expect(ContinuousClock.now - cancelledAt >= LEHost.cancelCompletionGrace)
        #expect(events.failed.value.map(\.0) == [late] && events.failed.value.map(\.1) == [.unknownConnectionIdentifier])
        let awaiting = Shared<Bool?>(nil)
        loop.execute { awaiting.update { $0 = host.awaitsLateCancelOutcome } }
        #expect(waitUntil(timeout: .seconds(5)) { awaiting.value != nil } && awaiting.value == true)

        // Bumble still initiates the cancelled attempt: another one is refused.
        let refused = Shared<Result<Void, HCIError>?>(nil)
        loop.execute { host.connect(to: present, ownRandomAddress: true) { r in refused.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(5)) { refused.value != nil })
        #expect(refused.value.map { if case .failure(.status(.commandDisallowed, _)) = $0 { true } else { false } } == true,
                "\(String(describing: refused.value))")

        // The cancelled peer appears: Bumble connects it, and the host hears of the link.
        let appearing = try PeerProcess(script: "bumble_advertiser.py",
                                        arguments: ["tcp-client:127.0.0.1:\(ports[2])", "Late", "\(late.address)"])
        defer { appearing.stop(failed: failed) }
        #expect(appearing.waitFor("ADVERTISING"))
        #expect(waitUntil(timeout: .seconds(15)) { !events.connected.value.isEmpty })
        let lateLink = try #require(events.connected.value.first)
        #expect(lateLink.peer == late && lateLink.role == .central)
        loop.execute { awaiting.update { $0 = host.awaitsLateCancelOutcome } }
        #expect(waitUntil(timeout: .seconds(5)) { awaiting.value == false })

        // Nobody wanted it: ended, and the next attempt goes through.
        loop.execute { host.disconnect(lateLink) }
        let connects = Shared<Result<Void, HCIError>?>(nil)
        loop.execute { host.connect(to: present, ownRandomAddress: true) { r in connects.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(15)) { events.connected.value.count == 2 })
        #expect(events.connected.value.last?.peer == present)
        #expect((try? connects.value?.get()) != nil)
        #expect(events.failed.value.count == 1)

        let stopped = Shared(false)
        loop.execute {
            host.stop()
            stopped.update { $0 = true }
        }
        #expect(waitUntil(timeout: .seconds(5)) { stopped.value })
        failed = false
    }
}
