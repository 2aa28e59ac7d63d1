import Bonding
import Foundation
import HCI
import HCIDriver
import HCITransport
import HostDevice
import HostStack
import RoleServices
import Scheduling
import VirtualController

/// Why a manager's device could not be made or started.
struct DeviceError: Error, CustomStringConvertible {
    var description: String
    /// The failed system call's error number, when opening the transport failed with one
    /// (what ``DeviceAvailability`` classifies).
    var errno: Int32?

    init(description: String, errno: Int32? = nil) {
        self.description = description
        self.errno = errno
    }
}

/// A test seam: an external controller's transport made by the test (one that fails to open
/// as an adapter would, then reaches a virtual controller), on a virtual radio's loop so that
/// retries run on virtual time. Passed under ``LocalDevice/overrideOptionKey``.
struct ExternalDeviceOverride: @unchecked Sendable {
    var radio: CBVirtualRadio
    var makeTransport: @Sendable (TransportSpec) throws -> HCITransport
}

/// One local Bluetooth device: a controller (virtual on a radio, or external over a transport)
/// and the ``HostDevice`` on it, which every manager using the controller shares. The host
/// device and everything above it run on the device's loop (the radio's loop for a virtual
/// device; a loop of its own otherwise).
///
/// Which managers share: those whose transport names the same external controller (the same
/// `CB_TRANSPORT` value, or the same ``CBManagerOptionLinuxTransportKey``) share one device in
/// the process, as an app's managers share a phone's radio (a UART, a TCP controller or the HCI
/// user channel serves one host). On a virtual radio each manager is a device of its own (its
/// own virtual controller): two phones in one process.
///
/// Loop-confined after `make`, except `loop`, `radio`, `identifiers`, `label` and the count of
/// managers (behind the registry's lock).
final class LocalDevice: @unchecked Sendable {
    let loop: EventLoop
    /// The virtual radio the device is on, if it is virtual.
    let radio: CBVirtualRadio?
    let identifiers: IdentifierStore
    /// What the device is, for messages: "virtual" or "tcp:127.0.0.1:9000".
    let label: String
    /// The host device on the controller while it is on. A new one is made when a virtual
    /// device is powered back on.
    private(set) var hostDevice: HostDevice?
    private(set) var controller: VirtualController?
    /// The external controller's transport, nil for a virtual device.
    let externalSpec: TransportSpec?
    /// Makes the external controller's transport (a test may substitute its own).
    private let makeTransport: @Sendable (TransportSpec) throws -> HCITransport
    /// Whether `loop` is the device's own, to shut down with it (not a radio's a test lent).
    private let ownsLoop: Bool
    /// How managers retry the controller while it is held or blocked.
    let retryPolicy = DeviceRetryPolicy()
    /// The connections of the device's central managers, for their connection events
    /// (loop-confined).
    let connectionEvents = ConnectionEvents()
    private let snoopPath: String?
    private let position: RadioPosition
    /// Starts in progress: each waiter hears the outcome.
    private var starting: [(Result<HostDevice, DeviceError>) -> Void]?
    /// Managers using the device (the registry's lock guards it).
    private var managers = 1
    /// Whether the controller has extended advertising and scanning and a faster or longer-range
    /// PHY, once it answered (for `CBCentralManager.supports`); readable from any thread.
    let extendedScanAndConnect = Locked<Bool?>(nil)
    /// Where bonds are kept, from the first manager that named a directory
    /// (``CBManagerOptionLinuxBondDirectoryKey``); readable from any thread.
    private let bondDirectory = Locked<String?>(nil)
    /// The resolvable private address rotation, when a manager asked for privacy
    /// (``CBManagerOptionLinuxPrivacyKey``); readable from any thread.
    let privacyRotation = Locked<Duration?>(nil)
    /// The smallest key size pairing accepts, when a manager named one
    /// (``CBManagerOptionLinuxMinimumKeySizeKey``); readable from any thread.
    let minimumKeySize = Locked<Int?>(nil)
    /// Whether refusals pair, when a manager said (``CBManagerOptionLinuxPairOnRefusalKey``).
    let pairsOnRefusal = Locked<Bool?>(nil)
    /// What waits for the bond store to open (the end of `start`).
    private var afterBondStore: (() -> Void)?

    private init(loop: EventLoop, radio: CBVirtualRadio?, identifiers: IdentifierStore, label: String,
                 externalSpec: TransportSpec?, snoopPath: String?, position: RadioPosition,
                 makeTransport: @escaping @Sendable (TransportSpec) throws -> HCITransport = { try $0.makeExternalTransport() },
                 ownsLoop: Bool = true) {
        self.loop = loop
        self.makeTransport = makeTransport
        self.ownsLoop = ownsLoop
        self.radio = radio
        self.identifiers = identifiers
        self.label = label
        self.externalSpec = externalSpec
        self.snoopPath = snoopPath
        self.position = position
    }

    /// External devices in use, by transport: managers naming the same one share it.
    private static let registry = Locked<[String: LocalDevice]>([:])

    /// The option under which tests pass an ``ExternalDeviceOverride`` (internal: not an API).
    static let overrideOptionKey = "kCBManagerOptionLinuxTestExternalDeviceOverride"

    /// Chooses the controller from the options, the task's current radio, `CB_TRANSPORT`, or
    /// the shared radio, in that order. An external controller another manager of the process
    /// uses is shared; call ``release()`` when the manager goes.
    static func make(options: [String: Any]?,
                     environment: [String: String] = ProcessInfo.processInfo.environment) -> Result<LocalDevice, DeviceError> {
        let result = choose(options: options, environment: environment)
        if case .success(let device) = result, let directory = options?[CBManagerOptionLinuxBondDirectoryKey] as? String {
            device.bondDirectory.withLock { $0 = $0 ?? directory }
        }
        if case .success(let device) = result, let privacy = options?[CBManagerOptionLinuxPrivacyKey] {
            let seconds: Int? = switch privacy {
            case let on as Bool: on ? 900 : nil
            case let number as NSNumber: number.intValue > 0 ? number.intValue : nil
            case let number as Int: number > 0 ? number : nil
            default: nil
            }
            if let seconds { device.privacyRotation.withLock { $0 = $0 ?? .seconds(seconds) } }
        }
        if case .success(let device) = result, let size = (options?[CBManagerOptionLinuxMinimumKeySizeKey] as? NSNumber)?.intValue,
           (7...16).contains(size) {
            device.minimumKeySize.withLock { $0 = $0 ?? size }
        }
        let pairOnRefusal = options?[CBManagerOptionLinuxPairOnRefusalKey]
        if case .success(let device) = result, let pairs = pairOnRefusal as? Bool ?? (pairOnRefusal as? NSNumber)?.boolValue {
            device.pairsOnRefusal.withLock { $0 = $0 ?? pairs }
        }
        return result
    }

    private static func choose(options: [String: Any]?, environment: [String: String]) -> Result<LocalDevice, DeviceError> {
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
            let key = "\(spec)"
            return .success(registry.withLock { devices in
                if let existing = devices[key] {
                    existing.managers += 1
                    return existing
                }
                let device: LocalDevice
                if let override = options?[overrideOptionKey] as? ExternalDeviceOverride {
                    device = LocalDevice(loop: override.radio.loop, radio: nil, identifiers: override.radio.identifiers,
                                         label: key, externalSpec: spec, snoopPath: snoop, position: position,
                                         makeTransport: override.makeTransport, ownsLoop: false)
                } else {
                    let loop = EventLoop(name: "CoreBluetooth \(spec)", pacing: .realTime)
                    device = LocalDevice(loop: loop, radio: nil, identifiers: .persistent, label: key,
                                         externalSpec: spec, snoopPath: snoop, position: position)
                }
                devices[key] = device
                return device
            })
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
    var address: String? { hostDevice?.address.map { "\($0.address)" } }

    /// Makes the controller (for a virtual device) and the host device, and initialises the
    /// controller; when the device is on already (another manager started it), `completion`
    /// gets it at once. Call on the loop; `completion` runs on the loop.
    func start(_ completion: @escaping (Result<HostDevice, DeviceError>) -> Void) {
        precondition(loop.inLoop)
        if let hostDevice, !hostDevice.isClosed { return completion(.success(hostDevice)) }
        // A radio of another process: its controllers attach once the handshake is over.
        if let proxy = radio?.proxy, !proxy.isJoined {
            return proxy.whenJoined { [self] error in
                if let error { return completion(.failure(DeviceError(description: "virtual:\(proxy.path): \(error)"))) }
                start(completion)
            }
        }
        if starting != nil {
            starting?.append(completion)
            return
        }
        starting = [completion]
        let finish = { [self] (result: Result<HostDevice, DeviceError>) in
            let waiters = starting ?? []
            starting = nil
            for waiter in waiters { waiter(result) }
        }
        var transport: HCITransport
        if let externalSpec {
            do {
                transport = try makeTransport(externalSpec)
            } catch {
                let code = (error as? HCITransportError)?.errno
                return finish(.failure(DeviceError(description: "\(externalSpec): \(error)", errno: code)))
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
                StackLog.logger.warning("cannot write capture \(snoopPath): \(error)")
            }
        }
        let device = HostDevice(transport: transport, loop: loop, deviceName: LocalDeviceName.current)
        device.pairingAgent = ProcessPairingAgent()
        // A peer that bonds keeps the identifier handed out for the address it paired from.
        device.onBond = { [identifiers] linkPeer, identity in identifiers.bonded(identity, seenAt: linkPeer) }
        if let size = minimumKeySize.current { device.securityConfiguration.minimumKeySize = size }
        if let pairs = pairsOnRefusal.current { device.raisesSecurityOnRefusal = pairs }
        hostDevice = device
        // Connections remote centrals make to the device are connection events too.
        connectionEvents.observeAcceptedConnections(on: device)
        device.start { [self] result in
            switch result {
            case .success:
                if let info = device.host.info {
                    let phys = info.leFeatures.contains(.le2MPHY) || info.leFeatures.contains(.leCodedPHY)
                    let value = info.supportsExtendedAdvertising && info.supportsExtendedScanning && phys
                    extendedScanAndConnect.withLock { $0 = value }
                }
                // Bonds, then the controller's resolving list and privacy: all before any
                // manager advertises, scans or connects (controllers refuse list changes then).
                openBondStore(for: device) { [self] in
                    device.loadResolvingList { [self] in
                        guard let rotation = privacyRotation.current else { return finish(.success(device)) }
                        device.enablePrivacy(rotation: rotation) { result in
                            if case .failure(let error) = result { StackLog.logger.notice("no private addresses: \(error)") }
                            finish(.success(device))
                        }
                    }
                }
            case .failure(let error):
                if hostDevice === device { hostDevice = nil }
                var code: Int32?
                if case .transportClosed(let closed?) = error { code = closed.errno }
                finish(.failure(DeviceError(description: "\(label): \(error)", errno: code)))
            }
        }
    }

    /// Gives an external controller its persistent bond store (the manager's
    /// ``CBManagerOptionLinuxBondDirectoryKey``, else `CB_BOND_DIR`, else
    /// `~/.local/state/corebluetooth-linux`), opened off the loop; a virtual controller, whose
    /// identity ends with the process, keeps bonds in memory unless `CB_BOND_DIR` names a
    /// directory. Then `done`, on the loop.
    private func openBondStore(for device: HostDevice, then done: @escaping () -> Void) {
        let named = bondDirectory.current.map { URL(fileURLWithPath: $0) }
        // One variable: `getenv`, not the whole environment as a dictionary (a walk of every
        // variable, once per manager).
        let explicit = named != nil || getenv("CB_BOND_DIR").map { $0.pointee != 0 } ?? false
        guard externalSpec != nil || explicit else { return done() }
        // The controller's identity: its public address (bonds follow the controller).
        guard let identity = device.host.info.map({ LEAddress(.publicDevice, $0.address) }) else { return done() }
        let deviceID = ObjectIdentifier(device)
        // Kept on the device, on the loop, until the store is open: only the store crosses threads.
        afterBondStore = done
        // On a virtual clock, time waits for the store (no effect on the wall clock).
        loop.holdClock()
        DispatchQueue.global().async { [self] in
            let store: BondStore?
            do {
                store = try BondStore(controllerIdentity: identity, directory: named)
            } catch {
                StackLog.logger.warning("bonds kept in memory only: \(error)")
                store = nil
            }
            loop.execute { [self] in
                loop.releaseClock()
                if let store, let hostDevice, ObjectIdentifier(hostDevice) == deviceID {
                    hostDevice.useBondStore(store)
                    // Bonded devices' identifiers are never evicted (none is made here).
                    for bond in store.bonds { identifiers.bonded(bond.peerIdentity, seenAt: bond.peerIdentity) }
                }
                let done = afterBondStore
                afterBondStore = nil
                done?()
            }
        }
    }

    /// Powers a virtual device off: its host device stops (its clients are not called; the
    /// manager reports the state) and the controller goes quiet. `start` powers it on again.
    /// No effect on external controllers. Call on the loop.
    func powerOffVirtual() {
        guard let controller else { return }
        hostDevice?.stop()
        hostDevice = nil
        controller.setPowered(false)
    }

    /// Moves a virtual device. Call on the loop.
    func move(to position: RadioPosition) {
        controller?.position = position
    }

    /// Whether the controller `transport` names (a `CB_TRANSPORT` value) has extended scanning
    /// and connections on the 2M or Coded PHY: our virtual controller has; an external one
    /// answers from its LE features once a manager of this process started it (false before).
    static func supportsExtendedScanAndConnect(transport: String) -> Bool {
        guard let spec = try? TransportSpec(parsing: transport) else { return false }
        if case .virtual = spec {
            let configuration = VirtualController.Configuration()
            return configuration.supportsExtendedAdvertising
        }
        let device = registry.withLock { $0["\(spec)"] }
        return device?.extendedScanAndConnect.withLock { $0 } ?? false
    }

    /// A manager of the device went away; the last one stops the host device and powers the
    /// controller off (for an external controller the loop stops too). Call from any thread.
    func release() {
        let last = Self.registry.withLock { devices -> Bool in
            managers -= 1
            guard managers == 0 else { return false }
            if let key = externalSpec.map({ "\($0)" }), devices[key] === self { devices[key] = nil }
            return true
        }
        guard last else { return }
        loop.execute { [self] in
            hostDevice?.stop()
            hostDevice = nil
            controller?.setPowered(false)
            if radio == nil, ownsLoop { loop.shutdown() }
        }
    }
}
