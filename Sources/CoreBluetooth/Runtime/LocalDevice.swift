import Foundation
import HCI
import HCIDriver
import HCITransport
import HostStack
import Scheduling
import VirtualController

/// Why a manager's device could not be made or started.
struct DeviceError: Error, CustomStringConvertible {
    var description: String
}

/// One local Bluetooth device, as each manager has: a controller (virtual on a radio, or
/// external over a transport) and the LE host on it. The host and everything above it run on
/// the device's loop (the radio's loop for a virtual device; a loop of its own otherwise).
///
/// Loop-confined after `make`, except `loop`, `radio`, `identifiers` and `label`.
final class LocalDevice: @unchecked Sendable {
    let loop: EventLoop
    /// The virtual radio the device is on, if it is virtual.
    let radio: CBVirtualRadio?
    let identifiers: IdentifierStore
    /// What the device is, for messages: "virtual CB:00:01:00:00:01" or "tcp:127.0.0.1:9000".
    let label: String
    /// The host on the controller. Replaced when a virtual device is powered back on.
    private(set) var host: LEHost?
    private(set) var controller: VirtualController?
    private let externalSpec: TransportSpec?
    private let snoopPath: String?
    private let position: RadioPosition
    private var ownAddress: String?

    private init(loop: EventLoop, radio: CBVirtualRadio?, identifiers: IdentifierStore, label: String,
                 externalSpec: TransportSpec?, snoopPath: String?, position: RadioPosition) {
        self.loop = loop
        self.radio = radio
        self.identifiers = identifiers
        self.label = label
        self.externalSpec = externalSpec
        self.snoopPath = snoopPath
        self.position = position
    }

    /// Chooses the controller from the options, the task's current radio, `CB_TRANSPORT`, or
    /// the shared radio, in that order.
    static func make(options: [String: Any]?,
                     environment: [String: String] = ProcessInfo.processInfo.environment) -> Result<LocalDevice, DeviceError> {
        let snoop = (options?[CBManagerOptionLinuxSnoopPathKey] as? String) ?? nextEnvironmentSnoopPath(environment)
        var position = RadioPosition()
        if let xyz = options?[CBManagerOptionLinuxPositionKey] as? [Double], xyz.count >= 2 {
            position = RadioPosition(x: xyz[0], y: xyz[1], z: xyz.count > 2 ? xyz[2] : 0)
        }
        let spec: TransportSpec
        do {
            if let text = options?[CBManagerOptionLinuxTransportKey] as? String {
                spec = try TransportSpec(parsing: text)
            } else if let radio = options?[CBManagerOptionLinuxRadioKey] as? CBVirtualRadio {
                return .success(virtual(on: radio, snoop: snoop, position: position))
            } else if let radio = CBVirtualRadio.current {
                return .success(virtual(on: radio, snoop: snoop, position: position))
            } else {
                spec = try TransportSpec.fromEnvironment(environment)
            }
        } catch {
            return .failure(DeviceError(description: "\(error)"))
        }
        switch spec {
        case .virtual(path: nil):
            return .success(virtual(on: .shared, snoop: snoop, position: position))
        case .virtual(path: let path?):
            do {
                return .success(virtual(on: try CBVirtualRadio.joining(path: path), snoop: snoop, position: position))
            } catch {
                return .failure(DeviceError(description: "virtual:\(path): \(error)"))
            }
        default:
            let loop = EventLoop(name: "CoreBluetooth \(spec)", pacing: .realTime)
            return .success(LocalDevice(loop: loop, radio: nil, identifiers: .persistent, label: "\(spec)",
                                        externalSpec: spec, snoopPath: snoop, position: position))
        }
    }

    private static func virtual(on radio: CBVirtualRadio, snoop: String?, position: RadioPosition) -> LocalDevice {
        LocalDevice(loop: radio.loop, radio: radio, identifiers: radio.identifiers, label: "virtual",
                    externalSpec: nil, snoopPath: snoop, position: position)
    }

    /// `CB_SNOOP` for the first device of the process, `NAME-2.EXT`, `NAME-3.EXT`… for the next
    /// ones, so that two managers in one program do not write over each other's capture.
    private static let snoopCount = Locked(0)
    private static func nextEnvironmentSnoopPath(_ environment: [String: String]) -> String? {
        guard let path = environment[Snoop.environmentVariable], !path.isEmpty else { return nil }
        let n = snoopCount.withLock { count -> Int in
            count += 1
            return count
        }
        guard n > 1 else { return path }
        let url = URL(fileURLWithPath: path)
        let ext = url.pathExtension
        let stem = url.deletingPathExtension().path
        return ext.isEmpty ? "\(stem)-\(n)" : "\(stem)-\(n).\(ext)"
    }

    /// The device's address on the air (its static random address, or the public one if the
    /// controller refused a random address), once started.
    var address: String? { ownAddress }

    /// Makes the controller (for a virtual device) and the host, and initialises the controller.
    /// Call on the loop; `completion` runs on the loop.
    func start(_ completion: @escaping (Result<LEHost, DeviceError>) -> Void) {
        precondition(loop.inLoop)
        var transport: HCITransport
        if let externalSpec {
            do {
                transport = try externalSpec.makeExternalTransport()
            } catch {
                completion(.failure(DeviceError(description: "\(externalSpec): \(error)")))
                return
            }
        } else if let controller {
            controller.setPowered(true)
            transport = controller.makeHostTransport()
        } else {
            let controller = radio!.makeController(position: position)
            self.controller = controller
            transport = controller.makeHostTransport()
        }
        if let snoopPath {
            do {
                transport = SnoopingTransport(wrapping: transport, writer: try BtsnoopWriter(path: snoopPath))
            } catch {
                StackLog.log("cannot write capture \(snoopPath): \(error)")
            }
        }
        let host = LEHost(transport: transport, loop: loop)
        host.log = StackLog.sink
        self.host = host
        host.start { [weak self] result in
            switch result {
            case .success(let info):
                // The device shows itself from a static random address, as phones do (with a
                // private one): stable across runs, derived from the public address. Some
                // controllers (Bumble's) route LE data only by random addresses.
                let random = LEHost.staticRandomAddress(from: info.address)
                host.setRandomAddress(random) { [weak self] result in
                    switch result {
                    case .success: self?.ownAddress = "\(random)"
                    case .failure(let error):
                        StackLog.log("no random address (\(error)): using the public address \(info.address)")
                        self?.ownAddress = "\(info.address)"
                    }
                    completion(.success(host))
                }
            case .failure(let error):
                self?.host = nil
                completion(.failure(DeviceError(description: "\(self?.label ?? "controller"): \(error)")))
            }
        }
    }

    /// Powers a virtual device off (its host sees the controller go away) or back on (call
    /// `start` again after). No effect on external controllers. Call on the loop.
    func setVirtualPower(_ on: Bool) {
        guard let controller else { return }
        if !on {
            controller.setPowered(false)
            host = nil
        }
    }

    /// Moves a virtual device. Call on the loop.
    func move(to position: RadioPosition) {
        controller?.position = position
    }

    /// Stops the host and powers the controller off; for an external controller the loop stops
    /// too. Call on the loop.
    func shutdown() {
        host?.delegate = nil
        host?.stop()
        host = nil
        controller?.setPowered(false)
        if radio == nil { loop.shutdown() }
    }
}
