import CoreBluetooth
import CoreBluetoothDaemon
import Foundation
import HostDevice
import Scheduling
import VirtualController

// Issue 19: notifications through corebluetoothd. The in-process workload (`notify_20B_per_s`)
// has a peripheral manager and a central manager on one virtual radio, instant air. Here the
// same peripheral manager stays in the process on the radio, and the central manager is a
// daemon client (`CB_TRANSPORT=daemon:PATH`): its calls and events cross a Unix socket to a
// `DaemonServer` whose device is another controller on the same radio. The daemon's side runs
// in this process too (on the radio's loop, as `corebluetoothd` runs its device's loop), so the
// figure is CPU time of both sides of the socket, as the in-process one is of both managers.
// The peripheral stays in process because the daemon's device is one controller: a peripheral
// on the same daemon could not connect to the daemon's own central.

/// The daemon's device on `radio` and its socket; `close()` ends both.
final class BenchDaemon: @unchecked Sendable {
    // `@unchecked Sendable`: immutable after init; the device is used on its loop only.
    let server: DaemonServer
    let path: String
    private let device: HostDevice
    private let controller: AnyObject

    init(radio: CBVirtualRadio) {
        let (controller, loop) = radio.makeHostController()
        let device = HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: "corebluetoothd")
        let started = DispatchSemaphore(value: 0)
        loop.execute {
            device.start { result in
                if case .failure(let error) = result { fail("the daemon's device did not start: \(error)") }
                started.signal()
            }
        }
        guard started.wait(timeout: .now() + 30) == .success else { fail("the daemon's device did not start") }
        path = FileManager.default.temporaryDirectory.appendingPathComponent("cbbench-\(getpid()).sock").path
        do {
            server = try DaemonServer(path: path, device: device)
        } catch {
            fail("corebluetoothd: \(error)")
        }
        self.device = device
        self.controller = controller
    }

    func close() {
        server.close()
        let device = device
        withExtendedLifetime(controller) { device.loop.execute { device.stop() } }
    }
}

/// `daemon_notify_20B_per_s`: `updateValue` → (radio) → the daemon's central session →
/// socket → `didUpdateValueFor` in the client, back to back, honouring
/// `peripheralManagerIsReady`; beside it the in-process rate of the same run.
func apiDaemonNotify(count: Int, inProcess: Double?) -> [Figure] {
    // Wall-clock radio: the virtual clock waits for delegate callbacks, not for bytes in a
    // socket, so it would leap past messages in flight. Instant air: no timer in the path.
    let radio = CBVirtualRadio(clock: .realTime, seed: 23, airTime: .instant)
    let daemon = BenchDaemon(radio: radio)
    defer { daemon.close() }
    let peripheral = BenchPeripheral(radio: radio, name: "daemon-bench")
    let central = BenchCentral(options: [CBManagerOptionLinuxTransportKey: "daemon:\(daemon.path)"], connectingTo: "daemon-bench")
    guard radio.run(until: { central.ready.value == 1 && peripheral.subscribers.value == 1 }, timeout: .seconds(30)) else {
        fail("the daemon's central did not connect and subscribe")
    }
    func notify(_ count: Int) -> (cpu: Double, wall: Double) {
        let start = central.received.value
        let bytesBefore = central.received.byteCount
        let time = measureBoth {
            peripheral.startNotifying(Data(repeating: 0x5A, count: 20), count: count)
            guard radio.run(until: { central.received.value - start >= count }, timeout: .seconds(600)) else {
                fail("daemon notify 20 B: \(central.received.value - start)/\(count)")
            }
        }
        precondition(central.received.byteCount - bytesBefore == count * 20, "values arrived cut")
        return time
    }
    _ = notify(min(count, 2_000))
    let time = notify(count)
    let rate = Double(count) / time.cpu
    withExtendedLifetime((peripheral, central)) {}
    var figures = [Figure(name: "daemon_notify_20B_per_s", value: rate, unit: "notif/s",
                          note: "updateValue → corebluetoothd (Unix socket) → didUpdateValueFor, 20-byte values, instant air (\(Int(Double(count) / time.wall)) /s wall)")]
    if let inProcess {
        figures.append(Figure(name: "daemon_notify_fraction_of_in_process", value: rate / inProcess, unit: "",
                              note: "daemon_notify_20B_per_s / notify_20B_per_s (target ≥ 0.25)"))
    }
    return figures
}
