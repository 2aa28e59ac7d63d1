import CoreBluetoothDaemon
import DaemonProtocol
import Dispatch
import Foundation
import HCI
import HCIDriver
import HostDevice
import HostStack
import RemoteRoles
import Scheduling
import VirtualController

/// The suites' daemon mode (`CB_TEST_ON_DAEMON=1`, docs/daemon.md "The suites on a daemon"): a
/// manager that would be a device of its own on an in-process virtual radio gets a
/// `corebluetoothd` of its own instead — a ``DaemonServer`` owning that virtual controller, in
/// this process, on a Unix socket — and reaches it as a client (`CB_TRANSPORT=daemon:PATH`
/// does), so every call and event of the suites crosses the wire protocol. The daemon's device
/// runs on the radio's loop and the client's sessions too, so that virtual time holds still
/// while a callback is queued (as in-process) and while a frame is on the socket
/// (``DaemonWireClock``). Not an API: a test seam read from the environment once.
///
/// `@unchecked Sendable`: every stored property is immutable after `make`; the host device and
/// the controller are touched on the radio's loop only.
final class DaemonTestDevice: @unchecked Sendable {
    let radio: CBVirtualRadio
    let path: String
    let host: DaemonSessionHost
    private let server: DaemonServer
    private let hostDevice: HostDevice
    private let controller: VirtualController

    /// Whether the process runs its managers on daemons (`CB_TEST_ON_DAEMON=1`).
    static let isOn: Bool = ProcessInfo.processInfo.environment["CB_TEST_ON_DAEMON"] == "1"

    private static let count = Locked(0)

    private init(radio: CBVirtualRadio, path: String, host: DaemonSessionHost, server: DaemonServer, hostDevice: HostDevice,
                 controller: VirtualController) {
        self.radio = radio
        self.path = path
        self.host = host
        self.server = server
        self.hostDevice = hostDevice
        self.controller = controller
    }

    /// The radio a manager with these options would be a device on, when the mode is on and
    /// the manager would be on an in-process radio; nil otherwise (the manager goes on as
    /// usual).
    static func radio(options: [String: Any]?) -> CBVirtualRadio? {
        guard isOn, options?[CBManagerOptionLinuxTransportKey] == nil else { return nil }
        let radio = (options?[CBManagerOptionLinuxRadioKey] as? CBVirtualRadio) ?? CBVirtualRadio.current
        // A radio of another process (joined over its socket) keeps its own path.
        guard let radio, radio.proxy == nil, !radio.loop.inLoop else { return nil }
        return radio
    }

    /// Starts a daemon owning a new virtual controller on `radio` and connects to it.
    static func make(radio: CBVirtualRadio, options: [String: Any]?) -> Result<DaemonTestDevice, DeviceError> {
        var position = RadioPosition()
        if let xyz = options?[CBManagerOptionLinuxPositionKey] as? [Double], xyz.count >= 2 {
            position = RadioPosition(x: xyz[0], y: xyz[1], z: xyz.count > 2 ? xyz[2] : 0)
        }
        let controller = radio.makeController(position: position)
        let loop = radio.loop
        let hostDevice = HostDevice(transport: controller.makeHostTransport(), loop: loop, deviceName: LocalDeviceName.current)
        let identifiers = radio.identifiers
        hostDevice.onBond = { linkPeer, identity in identifiers.bonded(identity, seenAt: linkPeer) }
        if let size = (options?[CBManagerOptionLinuxMinimumKeySizeKey] as? NSNumber)?.intValue, (7...16).contains(size) {
            hostDevice.securityConfiguration.minimumKeySize = size
        }
        let pairOnRefusal = options?[CBManagerOptionLinuxPairOnRefusalKey]
        if let pairs = pairOnRefusal as? Bool ?? (pairOnRefusal as? NSNumber)?.boolValue { hostDevice.raisesSecurityOnRefusal = pairs }
        let privacy: Duration? = switch options?[CBManagerOptionLinuxPrivacyKey] {
        case let on as Bool: on ? .seconds(900) : nil
        case let number as NSNumber: number.intValue > 0 ? .seconds(number.intValue) : nil
        default: nil
        }
        // The controller answers commands at once: starting needs no virtual time, so this
        // thread may wait for it while holding the radio's clock.
        let started = Locked<Result<LEAddress, HCIError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let device = Unchecked(hostDevice)
        loop.execute {
            let hostDevice = device.value
            hostDevice.start { result in
                started.withLock { $0 = result }
                guard case .success = result else {
                    done.signal()
                    return
                }
                hostDevice.loadResolvingList {
                    guard let privacy else {
                        done.signal()
                        return
                    }
                    hostDevice.enablePrivacy(rotation: privacy) { _ in done.signal() }
                }
            }
        }
        guard done.wait(timeout: .now() + 30) == .success, case .success = started.current else {
            return .failure(DeviceError(description: "the test daemon's controller did not start: \(started.current.map { "\($0)" } ?? "timeout")"))
        }
        let n = count.withLock { count -> Int in
            count += 1
            return count
        }
        let path = NSTemporaryDirectory() + "cbd-test-\(getpid())-\(n).sock"
        DaemonWireClock.register(path: path, loop: loop)
        do {
            let server = try DaemonServer(path: path, device: hostDevice)
            let host = try DaemonSessionHost.connecting(to: path, name: ProcessInfo.processInfo.processName, loop: loop)
            return .success(DaemonTestDevice(radio: radio, path: path, host: host, server: server, hostDevice: hostDevice,
                                             controller: controller))
        } catch {
            DaemonWireClock.unregister(path: path)
            loop.execute { device.value.stop() }
            return .failure(DeviceError(description: "the test daemon: \(error)"))
        }
    }

    /// The daemon's device address, once started (what `welcome` carries). On the loop.
    var address: String? { hostDevice.address.map { "\($0.address)" } }

    /// Moves the daemon's controller. On the loop.
    func move(to position: RadioPosition) { controller.position = position }

    /// The manager went: the client ends its connection as a process's end would (no
    /// reconnecting), the daemon stops, its controller leaves the air.
    func close() {
        host.abandon()
        server.close()
        DaemonWireClock.unregister(path: path)
        let device = Unchecked((hostDevice, controller))
        radio.loop.execute {
            device.value.0.stop()
            device.value.1.setPowered(false)
        }
    }
}
