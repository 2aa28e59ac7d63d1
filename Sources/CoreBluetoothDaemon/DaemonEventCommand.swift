import Foundation
import Logging
import Scheduling
import StackLogging

/// `corebluetoothd --on-event COMMAND`: the command started when an event arrives for a
/// restorable session no client holds (docs/daemon.md, "Restoration"), as iOS relaunches an
/// app in the background. It runs as `/bin/sh -c COMMAND`, as the daemon's user, with the
/// daemon's environment and `CB_RESTORE_IDENTIFIER`, `CB_RESTORE_ROLE` (`central` or
/// `peripheral`), `CB_RESTORE_EVENT` (``DaemonRestoration/Event``'s names) and `CB_RESTORE_UID`
/// (the user whose session it is).
///
/// ``launch(_:event:)`` never waits: the process is started on a queue of its own, off the
/// device's loop; its exit is reaped there (Foundation's `Process`) and logged when it failed,
/// and so is a failure to start it.
public final class DaemonEventCommand: Sendable {
    public let command: String
    /// `corebluetooth.daemon`: a command started (info), failed to start or ended badly (error).
    private let logger: Logger
    private let queue = DispatchQueue(label: "corebluetoothd --on-event")
    /// The commands running now, kept until they exit (their `Process` objects).
    private let running = Locked<[ObjectIdentifier: Process]>([:])

    public init(command: String, logging: StackLogging = .standard) {
        self.command = command
        logger = logging.logger(.daemon)
    }

    /// The environment the command gets for `key`'s `event`.
    public static func environment(for key: DaemonRestoration.Key, event: DaemonRestoration.Event,
                                   base: [String: String] = ProcessInfo.processInfo.environment) -> [String: String] {
        var environment = base
        environment["CB_RESTORE_IDENTIFIER"] = key.identifier
        environment["CB_RESTORE_ROLE"] = key.role.rawValue
        environment["CB_RESTORE_EVENT"] = event.rawValue
        environment["CB_RESTORE_UID"] = String(key.uid)
        return environment
    }

    /// Starts the command for `key`'s `event` (any thread; returns at once).
    public func launch(_ key: DaemonRestoration.Key, event: DaemonRestoration.Event) {
        let command = command
        queue.async { [self] in
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", command]
            process.environment = Self.environment(for: key, event: event)
            process.standardInput = FileHandle.nullDevice
            let id = ObjectIdentifier(process)
            process.terminationHandler = { [self] finished in
                running.withLock { _ = $0.removeValue(forKey: id) }
                if finished.terminationReason != .exit || finished.terminationStatus != 0 {
                    let how = finished.terminationReason == .exit ? "status" : "signal"
                    logger.error("""
                        --on-event for \(key.role.rawValue) \(key.identifier) (uid \(key.uid), \(event.rawValue)): \
                        the command ended with \(how) \(finished.terminationStatus)
                        """)
                }
            }
            running.withLock { $0[id] = process }
            do {
                try process.run()
                logger.info("--on-event for \(key.role.rawValue) \(key.identifier) (uid \(key.uid), \(event.rawValue)): started pid \(process.processIdentifier)")
            } catch {
                running.withLock { _ = $0.removeValue(forKey: id) }
                logger.error("--on-event for \(key.role.rawValue) \(key.identifier) (uid \(key.uid), \(event.rawValue)): the command could not start: \(error)")
            }
        }
    }
}
