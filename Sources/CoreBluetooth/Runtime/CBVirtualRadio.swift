import Bonding
import Foundation
import HCI
import Scheduling
import VirtualController

/// **Linux extension.** An in-process virtual radio: every Core Bluetooth manager that joins it is
/// its own device (its own virtual controller and address), like phones in one room, and they
/// find and connect to each other over the air the radio simulates.
///
/// With nothing configured, managers join ``shared``, a radio on the wall clock, so a
/// `CBPeripheralManager` and a `CBCentralManager` in one program see each other. Tests make a
/// radio of their own on a virtual clock and join it with ``withCurrent(_:_:)`` (or the
/// ``CBManagerOptionLinuxRadioKey`` option), then drive time with ``run(until:timeout:)``.
public final class CBVirtualRadio: @unchecked Sendable {
    /// How the radio's clock moves.
    public enum Clock: Sendable, Hashable {
        /// With the wall clock: what programs want.
        case realTime
        /// Only while the thread driving the radio waits in ``CBVirtualRadio/run(until:timeout:)``
        /// or ``CBVirtualRadio/run(for:)``, and then as fast as the work allows, skipping idle
        /// time but never past a delegate callback still queued or running: what tests want (a
        /// 30-second timeout takes milliseconds, and every run is the same).
        case virtual
    }

    /// How long packets take on the air.
    public enum AirTime: Sendable, Hashable {
        /// Packets arrive as soon as the radio gets to them; only advertising keeps its
        /// intervals. Throughput is bound by the CPU: what tests and the stack benchmarks want.
        case instant
        /// Air time by PHY and length, connection events at the connection interval, packets
        /// 150 µs apart within an event: the throughput a real link gets.
        case timed
    }

    public let clock: Clock
    /// How long packets take on the air.
    public let airTime: AirTime
    let loop: EventLoop
    let radio: any RadioMedium
    let identifiers: IdentifierStore
    /// Nil on a joined radio: the process's number there, known once joined, stands in.
    private let addressSeed: UInt64?
    /// The other process's radio this one joined, if it is one.
    let proxy: RadioProxy?
    private let deviceCount = Locked(0)

    /// A radio of its own. `seed` fixes the radio's randomness (RSSI noise) and the devices'
    /// addresses; identifiers of remote devices are kept in memory. `airTime` says whether
    /// packets take time on the air.
    public convenience init(clock: Clock = .virtual, seed: UInt64 = 1, airTime: AirTime = .instant) {
        self.init(clock: clock, seed: seed, airTime: airTime, rememberedPeers: 1024)
    }

    /// As above, keeping the identifiers of `rememberedPeers` remote devices that are not bonded
    /// (a benchmark with 10,000 peripherals retrieves them all by identifier).
    package init(clock: Clock, seed: UInt64, airTime: AirTime, rememberedPeers: Int) {
        self.clock = clock
        self.airTime = airTime
        loop = EventLoop(name: "CBVirtualRadio", pacing: clock == .virtual ? .unpaced : .realTime)
        radio = VirtualRadio(loop: loop, airTime: airTime == .timed ? .timed : .instant, seed: seed)
        identifiers = IdentifierStore(fileURL: nil, capacity: rememberedPeers)
        addressSeed = seed
        proxy = nil
        // The thread that made the radio drives it: time stands still until it waits.
        if clock == .virtual { loop.holdClock() }
    }

    private init(sharedWithIdentifiers identifiers: IdentifierStore) {
        clock = .realTime
        airTime = .instant
        loop = EventLoop(name: "CBVirtualRadio.shared", pacing: .realTime)
        radio = VirtualRadio(loop: loop, seed: 1)
        self.identifiers = identifiers
        addressSeed = 1
        proxy = nil
    }

    /// A radio another process hosts (`cbtool radio --listen PATH`), joined over its socket.
    private init(joining proxy: RadioProxy) {
        clock = .realTime
        airTime = .instant
        loop = proxy.loop
        radio = proxy
        identifiers = .persistent
        addressSeed = nil
        self.proxy = proxy
    }

    deinit { loop.shutdown() }

    /// The radios this process joined, by socket path: one connection per radio, whatever the
    /// number of managers on it.
    private static let joined = Locked<[String: CBVirtualRadio]>([:])

    /// The radio at the Unix socket `path` (`CB_TRANSPORT=virtual:PATH`), joined on first use.
    /// Throws at once when nobody listens there; the handshake goes on in the background (the
    /// devices wait for it: ``LocalDevice/start(_:)``), and a radio whose handshake failed is
    /// forgotten, so that the next manager tries again.
    static func joining(path: String) throws -> CBVirtualRadio {
        try joined.withLock { radios in
            if let radio = radios[path] { return radio }
            let proxy = try RadioProxy(path: path)
            let radio = CBVirtualRadio(joining: proxy)
            radios[path] = radio
            proxy.loop.execute { [weak radio] in
                proxy.whenJoined { error in
                    guard error != nil else { return }
                    joined.withLock { radios in
                        if let radio, radios[path] === radio { radios[path] = nil }
                    }
                }
            }
            return radio
        }
    }

    /// The radio that managers join when nothing else is configured (wall clock). Identifiers of
    /// the devices seen on it are kept across runs, as on a phone.
    public static let shared = CBVirtualRadio(sharedWithIdentifiers: .persistent)

    @TaskLocal static var current: CBVirtualRadio?

    /// Runs `body` with managers created in it (on this task) joining `radio` instead of
    /// ``shared``.
    public static func withCurrent<T>(_ radio: CBVirtualRadio, _ body: () throws -> T) rethrows -> T {
        try $current.withValue(radio, operation: body)
    }

    /// Async form of ``withCurrent(_:_:)``.
    public static func withCurrent<T>(_ radio: CBVirtualRadio, _ body: () async throws -> T) async rethrows -> T {
        try await $current.withValue(radio, operation: body)
    }

    /// Makes the next device's controller: a public address unique on this radio (the same
    /// sequence for the same seed, so identifiers stay stable across runs).
    func makeController(position: RadioPosition) -> VirtualController {
        let index = deviceCount.withLock { count -> UInt64 in
            count += 1
            return UInt64(count)
        }
        // 0xCB in the top octet marks our virtual devices; the seed keeps radios apart.
        // On a joined radio, addresses unique across its processes: the process's number on it.
        let seed = addressSeed ?? 0x8000 | UInt64((proxy?.client ?? 0) & 0x7FFF)
        let value = (0xCB << 40) | ((seed & 0xFFFF) << 24) | (index & 0xFF_FFFF)
        return VirtualController(radio: radio, address: BluetoothAddress(value: value), position: position)
    }

    /// For the package's tools that put a host of their own on the radio (cbbench's
    /// `corebluetoothd` workload: the daemon's device beside in-process managers): a new
    /// device's controller on this radio, and the loop its host must run on.
    package func makeHostController() -> (controller: VirtualController, loop: EventLoop) {
        (makeController(position: RadioPosition()), loop)
    }

    // MARK: Driving time (virtual clock)

    /// Lets the radio's time run until `condition` holds, checking it after every delegate
    /// callback, or until `timeout` of the radio's time passes (on a ``Clock/realTime`` radio,
    /// of wall time). Returns whether the condition held. On a virtual clock, time stops again
    /// when this returns, right where the condition became true.
    ///
    /// `condition` runs on the delegate queues' threads: read state the delegates write through
    /// a lock (or the Core Bluetooth objects' own properties, which are thread-safe). It is not
    /// `@Sendable` so that `#expect(radio.run(until: { … }))` compiles; it must only read
    /// thread-safe state.
    @discardableResult
    public func run(until condition: @escaping () -> Bool, timeout: Duration = .seconds(60)) -> Bool {
        let condition = Unchecked(condition).sendable
        if condition() { return true }
        guard clock == .virtual else {
            return Self.waitForCallbacks(until: condition, timeout: timeout)
        }
        let waiter = CallbackWaiters.Waiter(condition: condition, clock: loop)
        CallbackWaiters.shared.add(waiter)
        defer { CallbackWaiters.shared.remove(waiter) }
        // Checked again now that callbacks see the waiter: work on other threads goes on while
        // this thread holds the clock, and may have made the condition true in between.
        if waiter.isAlreadySatisfied() { return true }
        let deadline = loop.schedule(after: timeout) { waiter.expire() }
        loop.releaseClock()
        // The wall-clock bound only matters if the radio's work never lets time reach the
        // deadline (a livelock): it ends the wait instead of hanging the test.
        waiter.wait(wallDeadline: Date(timeIntervalSinceNow: 120))
        deadline.cancel()
        return waiter.satisfied
    }

    /// Lets `duration` of the radio's time pass (on a ``Clock/realTime`` radio, of wall time).
    public func run(for duration: Duration) {
        guard clock == .virtual else {
            Thread.sleep(forTimeInterval: Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
            return
        }
        _ = run(until: { false }, timeout: duration)
    }

    /// The radio's time since it was made.
    public var now: Duration {
        .nanoseconds(loop.currentTime.nanoseconds)
    }

    /// Waits (on the wall clock, up to `timeout`) until `condition` holds, checking it after
    /// every delegate callback of every manager: for managers on external controllers, whose
    /// time is the wall clock.
    @discardableResult
    public static func waitForCallbacks(until condition: @escaping () -> Bool,
                                        timeout: Duration = .seconds(60)) -> Bool {
        let condition = Unchecked(condition).sendable
        if condition() { return true }
        let waiter = CallbackWaiters.Waiter(condition: condition, clock: nil)
        CallbackWaiters.shared.add(waiter)
        defer { CallbackWaiters.shared.remove(waiter) }
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        waiter.wait(wallDeadline: Date(timeIntervalSinceNow: seconds))
        return waiter.satisfied
    }
}
