import Foundation
import Logging
import Scheduling
import StackLogging

/// Calls the app should not make (Apple logs them as "API MISUSE" and ignores them): logged
/// (`corebluetooth.api`, error: shown unless `CB_LOG=0`, as before) once per distinct message and kept for tests.
enum APIMisuse {
    private static let seen = Locked<[String]>([])

    /// Logs `message` (the first time it is seen) and records it.
    static func report(_ message: String) {
        let isNew = seen.withLock { seen -> Bool in
            let isNew = !seen.contains(message)
            seen.append(message)
            if seen.count > 1000 { seen.removeFirst(seen.count - 1000) }
            return isNew
        }
        if isNew { StackLog.logger.error("API MISUSE: \(message)") }
    }

    /// Every report so far, oldest first (the last 1000).
    static var reports: [String] { seen.current }
}

/// The API layer's logger, `corebluetooth.api`: why a manager has no usable device (error:
/// the one thing shown when `CB_LOG` is unset, as the app otherwise sees only `.unsupported`;
/// `CB_LOG=0` hides it too, for a tool that reports `linuxUnavailableReason` itself), and
/// things worth telling a developer that are not misuse (a transport failing).
enum StackLog {
    /// Made when used (rare events), so that it follows the logging system an app bootstrapped.
    static var logger: Logger { StackLogging.standard.logger(.api) }

    /// Why a manager has no usable device.
    static func deviceProblem(_ message: String) {
        logger.error("\(message)")
    }
}
