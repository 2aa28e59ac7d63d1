import ATT
@testable import CoreBluetooth
import Foundation
import GATT
import HCI
import HCIDriver
import HostStack
import Scheduling
import VirtualController

/// A device on a test's virtual radio driven straight through the host stack (no Core Bluetooth
/// API): an independent peer for byte-level checks of what our managers put on the air. Its
/// state lives on the radio's loop; the test reads it with `snapshot` and waits with
/// `radio.run(until:)` (its events count as callbacks for the waiters).
final class RawDevice: LEHostDelegate, @unchecked Sendable {
    let radio: CBVirtualRadio
    var loop: EventLoop { radio.loop }
    private(set) var host: LEHost!
    private(set) var controller: VirtualController!
    /// Loop-confined state.
    private(set) var reports: [AdvertisingReport] = []
    private(set) var connection: LEConnection?
    private(set) var bearer: ATTBearer?
    private(set) var client: GATTClient?
    private(set) var disconnectReason: HCIStatus?
    /// A GATT server to attach to each connection (set it before connecting).
    var server: GATTServer?
    /// The ATT_MTU this device offers (set it before connecting); nil for the bearer's default.
    var preferredMTU: Int?

    init(radio: CBVirtualRadio, position: RadioPosition = RadioPosition()) throws {
        self.radio = radio
        let started = Locked<Bool?>(nil)
        radio.loop.execute { [self] in
            controller = radio.makeController(position: position)
            host = LEHost(transport: controller.makeHostTransport(), loop: radio.loop)
            host.delegate = self
            host.start { result in
                started.withLock { $0 = (try? result.get()) != nil }
                CallbackWaiters.shared.callbackFinished(clock: self.radio.loop)
            }
        }
        guard radio.run(until: { started.current != nil }, timeout: .seconds(5)), started.current == true else {
            throw RawDeviceError("raw device did not start")
        }
    }

    var address: LEAddress { LEAddress(.publicDevice, controller.publicAddress) }

    /// Runs `body` on the loop and returns its result (blocking the test thread briefly).
    func onLoop<T: Sendable>(_ body: @escaping @Sendable (RawDevice) -> T) -> T {
        // Conditions of `radio.run(until:)` may run on the loop itself.
        if loop.inLoop { return body(self) }
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            result.withLock { $0 = body(self) }
            done.signal()
        }
        done.wait()
        return result.current!
    }

    /// Runs a loop procedure with a completion and waits (on the radio's time) for its result.
    func await<T: Sendable, E: Error>(timeout: Duration = .seconds(35),
                                     _ body: @escaping @Sendable (RawDevice, @escaping (Result<T, E>) -> Void) -> Void) throws -> T {
        let result = Locked<Result<T, E>?>(nil)
        loop.execute { [self] in
            body(self) { outcome in
                result.withLock { $0 = outcome }
                CallbackWaiters.shared.callbackFinished(clock: self.radio.loop)
            }
        }
        guard radio.run(until: { result.current != nil }, timeout: timeout), let outcome = result.current else {
            throw RawDeviceError("no answer within \(timeout)")
        }
        return try outcome.get()
    }

    /// Reads loop-confined state.
    func snapshot<T: Sendable>(_ body: @escaping @Sendable (RawDevice) -> T) -> T { onLoop(body) }

    // MARK: LEHostDelegate

    func host(_ host: LEHost, didDiscover report: AdvertisingReport) {
        reports.append(report)
        CallbackWaiters.shared.callbackFinished(clock: self.radio.loop)
    }

    func host(_ host: LEHost, didConnect connection: LEConnection) {
        self.connection = connection
        let bearer = ATTBearer(channel: connection.l2cap.att, loop: loop)
        if let preferredMTU { bearer.preferredMTU = preferredMTU }
        self.bearer = bearer
        if let server { _ = server.attach(bearer) }
        client = GATTClient(bearer: bearer)
        CallbackWaiters.shared.callbackFinished(clock: self.radio.loop)
    }

    func host(_ host: LEHost, didDisconnect connection: LEConnection, reason: HCIStatus) {
        self.connection = nil
        disconnectReason = reason
        CallbackWaiters.shared.callbackFinished(clock: self.radio.loop)
    }
}

struct RawDeviceError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
