import Bonding
import Dispatch
import Foundation
import HCITransport
import HostDevice
import DaemonProtocol
import HostStack
import RemoteRoles
import SMP
import Scheduling
import Synchronization

/// What both managers share: the state of the local Bluetooth device.
///
/// On Linux, managers that name the same external controller share it (one host device per
/// controller, as an app's managers share a phone's radio); on a virtual radio each manager is
/// a device of its own: see ``CBVirtualRadio`` and ``CBManagerOptionLinuxTransportKey``.
open class CBManager: NSObject, ObjectLockHolder, @unchecked Sendable {
    // @unchecked: the app-visible state below is guarded by `objectLock` (the manager's own,
    // see ``ObjectLock``) or atomic (`state`); `attemptState` is confined to the role's loop;
    // the rest is immutable.
    /// The manager's lock, shared by the objects the stack makes for it.
    let objectLock = ObjectLock()
    /// `state`'s raw value, atomic rather than under `objectLock`: every call that needs the
    /// manager powered on reads it (`updateValue`, once a notification).
    private let stateStorage = Atomic<Int>(CBManagerState.unknown.rawValue)
    private var unavailableReasonStorage: String?
    private var pairingAgentStorage: (any CBPairingAgent)?
    /// What opening this manager's controller said about the permission to use it.
    private var permissionStorage: CBManagerAuthorization?
    /// The state the last start attempt reported (loop-confined): retries report a state only
    /// when it changes.
    private var attemptState: CBManagerState?

    /// The state of the device; `.unknown` until the first state callback.
    ///
    /// On Linux the platform decides it as iOS's system would: `.unauthorized` when the process
    /// may not use the controller (the HCI user channel without CAP_NET_ADMIN), `.unsupported`
    /// when there is no such controller, `.resetting` while another process holds the adapter
    /// (retried; `.poweredOn` once it is free), `.poweredOff` while it is blocked by rfkill.
    /// ``linuxUnavailableReason`` says why and what to do.
    open var state: CBManagerState { CBManagerState(rawValue: stateStorage.load(ordering: .acquiring)) ?? .unknown }

    /// This manager's authorization to use Bluetooth: `.denied` when opening its controller
    /// failed for want of a permission (its state is then `.unauthorized`), otherwise the class
    /// property's answer.
    @available(*, deprecated, message: "Use the class property CBManager.authorization instead")
    open var authorization: CBManagerAuthorization { managerAuthorization }

    /// The per-manager answer, without the deprecation.
    var managerAuthorization: CBManagerAuthorization {
        synchronized { permissionStorage } ?? ProcessAuthorization.current
    }

    /// The process's authorization to use Bluetooth.
    ///
    /// Linux has no Bluetooth permission prompt; the controller's own permissions stand in for
    /// it. This is the last answer a manager of this process got opening a controller that
    /// needs a permission: `.denied` after the HCI user channel refused it for want of
    /// CAP_NET_ADMIN (or a serial device or Unix socket refused this user), `.allowedAlways`
    /// once one opened. Before any manager tried, it is `.denied` when `CB_TRANSPORT` names an
    /// HCI adapter and the process lacks CAP_NET_ADMIN, as iOS answers before the first
    /// manager; otherwise `.allowedAlways`.
    open class var authorization: CBManagerAuthorization { ProcessAuthorization.current }

    let callbacks: CallbackQueue
    /// Nil when the options or `CB_TRANSPORT` named no usable controller (`deviceProblem` says
    /// why), or named `corebluetoothd` (`remote`).
    let device: LocalDevice?
    let deviceProblem: DeviceError?
    /// The connection to `corebluetoothd` when the transport is `daemon` or `daemon:PATH`: the
    /// manager's role is the daemon's, reached through messages (docs/daemon.md).
    let remote: DaemonSessionHost?
    /// The daemon of this manager's own in the suites' daemon mode (`CB_TEST_ON_DAEMON=1`:
    /// ``DaemonTestDevice``); `remote` is the connection to it.
    let testDaemon: DaemonTestDevice?

    /// A loop for the callback queue of a manager without a device (it never runs anything).
    private static let idleLoop = EventLoop(name: "CoreBluetooth idle", pacing: .manual)

    init(queue: DispatchQueue?, options: [String: Any]?) {
        // The variables both choices read, one by one (ProcessEnvironment says why).
        let environment = ProcessEnvironment.values(of: [TransportSpec.environmentVariable, Snoop.environmentVariable,
                                                          DaemonSocketPath.runtimeDirectoryVariable])
        // The suites' daemon mode: a daemon of the manager's own on its radio.
        var made: DaemonTestDevice?
        let daemon: Result<DaemonSessionHost, DeviceError>?
        if let radio = DaemonTestDevice.radio(options: options) {
            daemon = DaemonTestDevice.make(radio: radio, options: options).map { testDevice in
                made = testDevice
                return testDevice.host
            }
        } else {
            daemon = Self.daemon(options: options, environment: environment)
        }
        testDaemon = made
        switch daemon {
        case .success(let host)?:
            remote = host
            device = nil
            deviceProblem = nil
        case .failure(let problem)?:
            remote = nil
            device = nil
            deviceProblem = problem
        case nil:
            remote = nil
            switch LocalDevice.make(options: options, environment: environment) {
            case .success(let device):
                self.device = device
                deviceProblem = nil
            case .failure(let problem):
                device = nil
                deviceProblem = problem
            }
        }
        callbacks = CallbackQueue(queue: queue, clock: device?.loop ?? remote?.loop ?? Self.idleLoop)
        super.init()
    }

    /// The daemon the transport names (`daemon:PATH`, or `daemon`: the user's socket, then the
    /// system's), in the order a controller is chosen (the option, a radio, `CB_TRANSPORT`);
    /// nil when it names none.
    static func daemon(options: [String: Any]?,
                       environment: [String: String] = ProcessInfo.processInfo.environment) -> Result<DaemonSessionHost, DeviceError>? {
        let text: String
        if let option = options?[CBManagerOptionLinuxTransportKey] as? String {
            text = option
        } else if options?[CBManagerOptionLinuxRadioKey] != nil || CBVirtualRadio.current != nil {
            return nil
        } else if let variable = environment[TransportSpec.environmentVariable] {
            text = variable
        } else {
            return nil
        }
        let prefix = "daemon:"
        guard text == "daemon" || text.hasPrefix(prefix) else { return nil }
        let paths = text == "daemon" ? DaemonSocketPath.clientCandidates(environment: environment) : [String(text.dropFirst(prefix.count))]
        let name = ProcessInfo.processInfo.processName
        var problems: [String] = []
        for path in paths {
            do {
                return .success(try DaemonSessionHost.connecting(to: path, name: name))
            } catch {
                problems.append("\(error)")
            }
        }
        return .failure(DeviceError(description: problems.joined(separator: "; ")))
    }

    /// The loop the manager's role runs on: its device's, or its daemon connection's.
    var roleLoop: EventLoop? { device?.loop ?? remote?.loop }

    /// Where the identifiers of the peers this manager sees are kept: its device's radio's (or
    /// the process's), the radio's in the suites' daemon mode.
    var identifierStore: IdentifierStore { device?.identifiers ?? testDaemon?.radio.identifiers ?? .persistent }

    deinit {
        testDaemon?.close()
        guard let device else { return }
        // The role service leaves the device (its scan, connections, advertising set and
        // services with it); the device stops when its last manager is gone.
        if let client = deviceClient {
            let leaving = Unchecked(client)
            device.loop.execute { device.hostDevice?.removeClient(leaving.value) }
        }
        device.release()
    }

    /// The subclass's role service on the device (a `let`, so that `deinit` may read it).
    var deviceClient: (any HostDeviceClient)? { nil }

    /// **Linux extension.** Answers pairing questions on this manager's connections (on its
    /// delegate queue). Nil (the default): ``CBPairing/defaultAgent``, and without one every
    /// pairing is Just Works and accepted. On iOS the system asks the user instead.
    public var linuxPairingAgent: (any CBPairingAgent)? {
        get { synchronized { pairingAgentStorage } }
        set {
            _ = synchronized { replace(&pairingAgentStorage, with: newValue) }
            let agent = newValue.map {
                ManagerPairingAgent(agent: $0, callbacks: callbacks, identifiers: identifierStore)
            }
            installPairingAgent(agent)
        }
    }

    /// The subclass gives its role service the agent.
    func installPairingAgent(_ agent: (any PairingAgent)?) {}

    // MARK: For the subclasses

    /// Starts the device; subclasses call it at the end of their init. The state callback
    /// follows: `.poweredOn`, or `.unsupported` when the controller cannot be used.
    func startDevice() {
        if let remote { return startRemote(remote) }
        guard let device else {
            let reason = deviceProblem?.description ?? "?"
            synchronized { unavailableReasonStorage = reason }
            StackLog.deviceProblem("no Bluetooth device: \(reason)")
            deliverState(.unsupported)
            return
        }
        device.loop.execute { [weakSelf = WeakHandle(self)] in
            weakSelf.object?.attemptStart(on: device, failingSince: nil)
        }
    }

    /// The manager's device is the daemon's: subclasses open their role's session there. This
    /// one (a role the daemon does not serve yet) is `.unsupported`.
    func startRemote(_ remote: DaemonSessionHost) {
        deliverRemoteState(CBManagerState.unsupported.rawValue, reason: "corebluetoothd does not serve this role yet")
    }

    /// A state the daemon reported for this manager's session (a `CBManagerState` raw value),
    /// with why it is not powered on.
    func deliverRemoteState(_ raw: Int, reason: String?) {
        let state = CBManagerState(rawValue: raw) ?? .unsupported
        synchronized { unavailableReasonStorage = state == .poweredOn ? nil : reason }
        if state != .poweredOn, let reason { StackLog.deviceProblem("Bluetooth device unusable: \(reason)") }
        deliverState(state)
    }

    /// The path the `setcap` advice names: this process's executable.
    private static let executablePath: String =
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments.first ?? "BINARY"

    /// On the loop: starts the device; a failure is classified (``DeviceAvailability``) into
    /// the state, the authorization and the reason, and a held or blocked adapter is tried
    /// again after the retry interval, the state reported only when it changes.
    private func attemptStart(on device: LocalDevice, failingSince: LoopInstant?) {
        device.start { [weakSelf = WeakHandle(self)] result in
            guard let self = weakSelf.object else { return }
            let spec = device.externalSpec
            switch result {
            case .success(let hostDevice):
                if let spec, DeviceAvailability.needsPermission(spec) { self.learnPermission(.allowedAlways) }
                self.synchronized { self.unavailableReasonStorage = nil }
                self.attemptState = .poweredOn
                self.deviceDidStart(hostDevice)
                self.deliverState(.poweredOn)
            case .failure(let problem):
                let policy = device.retryPolicy
                let since = failingSince ?? device.loop.currentTime
                var availability = DeviceAvailability.classify(
                    transport: spec, errno: problem.errno, message: "\(problem)", executable: Self.executablePath)
                if availability.state == .resetting, device.loop.currentTime - since >= policy.giveUpAfter {
                    availability = availability.givingUp(after: policy.giveUpAfter)
                }
                if let permission = availability.permission { self.learnPermission(permission) }
                self.synchronized { self.unavailableReasonStorage = availability.reason }
                if self.attemptState != availability.state {
                    self.attemptState = availability.state
                    StackLog.deviceProblem("Bluetooth device unusable: \(availability.reason)")
                    self.deliverState(availability.state)
                }
                guard availability.retries else { return }
                _ = device.loop.schedule(after: policy.interval) { [weakSelf = WeakHandle(self)] in
                    weakSelf.object?.attemptStart(on: device, failingSince: since)
                }
            }
        }
    }

    /// Records what opening the controller said about the permission, for this manager and
    /// the process.
    private func learnPermission(_ permission: CBManagerAuthorization) {
        synchronized { permissionStorage = permission }
        ProcessAuthorization.learned.withLock { $0 = permission }
    }

    /// On the loop, when the device is up (first start and after a power cycle): join it as a
    /// client.
    func deviceDidStart(_ hostDevice: HostDevice) {}

    /// On the loop, when the device's controller went away (powered off, transport closed):
    /// drop connections and procedures; the state callback (`.poweredOff`) follows.
    func deviceDidStop() {}

    /// On the loop: the role service calls it when its device closed.
    func hostDidClose(_ error: HCITransportError?) {
        if let error { StackLog.logger.warning("\(device?.label ?? "controller") closed: \(error)") }
        deviceDidStop()
        deliverState(.poweredOff)
    }

    /// On the loop: the controller reset itself (a Hardware Error) and the host is resetting
    /// it. Connections were reported lost (`didDisconnectPeripheral` with an error, calls under
    /// way answered first); what is left goes as when the controller goes (scan, pending
    /// connections; a peripheral manager's services, advertising and centrals), and the state
    /// is `.resetting`, as iOS reports when bluetoothd recovers the radio.
    func hostWillReset() {
        StackLog.logger.warning("\(device?.label ?? "controller") reset itself; resetting it")
        synchronized { unavailableReasonStorage = "the controller reset itself (hardware error); the host is resetting it" }
        deviceDidStop()
        deliverState(.resetting)
    }

    /// On the loop: the controller is back after its reset: `.poweredOn` again; the app
    /// scans, connects, adds services and advertises again.
    func hostDidReset() {
        guard let hostDevice = device?.hostDevice, !hostDevice.isClosed else { return }
        synchronized { unavailableReasonStorage = nil }
        deviceDidStart(hostDevice)
        deliverState(.poweredOn)
    }

    /// Sets `state` and calls the delegate's state callback, on the delegate queue.
    func deliverState(_ newState: CBManagerState) {
        callbacks.async { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object else { return }
            self.stateStorage.store(newState.rawValue, ordering: .releasing)
            self.stateDidChange()
        }
    }

    /// On the delegate queue, after `state` changed: subclasses call their delegate.
    func stateDidChange() {}

    /// Whether `state` is `.poweredOn`; otherwise reports `call` as API misuse.
    func requirePoweredOn(_ call: String) -> Bool {
        let current = state
        guard current == .poweredOn else {
            APIMisuse.report("<\(type(of: self))> can only accept \(call) while in the powered on state (state is \(current))")
            return false
        }
        return true
    }

}

// MARK: - Linux extensions

extension CBManager {
    /// **Linux extension.** Why the state is not `.poweredOn`: the controller `CB_TRANSPORT` (or
    /// the transport option) names could not be opened or initialised, and what to do about it
    /// (for `.unauthorized`: the capability to grant, `setcap cap_net_admin+ep` on the
    /// executable or running as root, and releasing the adapter from bluetoothd; for
    /// `.resetting`: who holds the adapter). Nil while the controller is usable.
    public var linuxUnavailableReason: String? { synchronized { unavailableReasonStorage } }

    /// **Linux extension.** The address this manager's device uses on the air, once it is
    /// powered on: a static random address derived from the controller's public one
    /// ("CB:00:01:00:00:02" on the virtual radio, where the two are the same), as phones use
    /// random addresses. It advertises and connects from this address.
    public var linuxDeviceAddress: String? {
        if let testDaemon, state == .poweredOn {
            return testDaemon.radio.loop.sync { testDaemon.address }
        }
        guard let device, state == .poweredOn else { return nil }
        return device.loop.sync { device.address }
    }

    /// **Linux extension.** Moves this manager's device on its virtual radio (metres); RSSI
    /// seen by others follows the distance. No effect on other controllers.
    public func linuxMove(x: Double, y: Double, z: Double = 0) {
        if let testDaemon {
            testDaemon.radio.loop.execute { testDaemon.move(to: .init(x: x, y: y, z: z)) }
        }
        guard let device else { return }
        device.loop.execute { device.move(to: .init(x: x, y: y, z: z)) }
    }

    /// **Linux extension.** Turns this manager's virtual controller off or back on, as the
    /// user toggling Bluetooth: the state goes to `.poweredOff` (scans stop, connections drop)
    /// and back to `.poweredOn`. No effect on other controllers.
    public func linuxSetVirtualPower(_ on: Bool) {
        guard let device else { return }
        device.loop.execute { [weakSelf = WeakHandle(self)] in
            guard let self = weakSelf.object, device.radio != nil else { return }
            if on {
                // Off, or its controller's transport closed (the manager reported .poweredOff).
                guard device.hostDevice?.isClosed ?? true else { return }
                device.start { [weakSelf = WeakHandle(self)] result in
                    guard let self = weakSelf.object, case .success(let hostDevice) = result else { return }
                    self.deviceDidStart(hostDevice)
                    self.deliverState(.poweredOn)
                }
            } else {
                guard device.hostDevice != nil else { return }
                device.powerOffVirtual()
                self.deviceDidStop()
                self.deliverState(.poweredOff)
            }
        }
    }
}

/// A remote device: the peripheral a central talks to, or the central a peripheral serves.
open class CBPeer: NSObject, NSCopying, ObjectLockHolder, @unchecked Sendable {
    // @unchecked: immutable; subclasses guard their state with `objectLock`.
    private let identifierStorage: UUID
    /// The lock of the manager that made the peer (``ObjectLock``).
    let objectLock: ObjectLock

    /// The device's identifier: made the first time the device is seen, and kept across runs.
    open var identifier: UUID { identifierStorage }

    init(identifier: UUID, lock: ObjectLock) {
        identifierStorage = identifier
        objectLock = lock
        super.init()
    }

    open func copy(with zone: NSZone? = nil) -> Any { self }
}

/// What services, characteristics and descriptors share: a UUID.
open class CBAttribute: NSObject, ObjectLockHolder, @unchecked Sendable {
    // @unchecked: immutable; subclasses guard their state with `objectLock`.
    private let uuidStorage: CBUUID
    /// Its peripheral's lock for a remote attribute, its own for a user-made one
    /// (``ObjectLock``).
    let objectLock: ObjectLock

    /// The attribute's type.
    open var uuid: CBUUID { uuidStorage }

    init(uuid: CBUUID, lock: ObjectLock) {
        uuidStorage = uuid
        objectLock = lock
        super.init()
    }
}
