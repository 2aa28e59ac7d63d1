import Foundation
import Scheduling

/// Calls the app should not make (Apple logs them as "API MISUSE" and ignores them): logged to
/// standard error once per distinct message and kept for tests.
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
        if isNew { FileHandle.standardError.write(Data("[CoreBluetooth] API MISUSE: \(message)\n".utf8)) }
    }

    /// Every report so far, oldest first (the last 1000).
    static var reports: [String] { seen.current }
}

/// Things worth telling a developer that are not misuse (a transport failing, a peer
/// misbehaving): standard error when `CB_LOG` is set.
enum StackLog {
    static let isEnabled = ProcessInfo.processInfo.environment["CB_LOG"].map { !$0.isEmpty && $0 != "0" } ?? false
    /// `CB_LOG=0`: not even why a device is unusable (a tool that reports it itself, from
    /// `linuxUnavailableReason`).
    static let isQuiet = ProcessInfo.processInfo.environment["CB_LOG"] == "0"

    /// Why a manager has no usable device: on standard error unless `CB_LOG=0`, as the app
    /// otherwise sees only `.unsupported`.
    static func deviceProblem(_ message: String) {
        guard !isQuiet else { return }
        FileHandle.standardError.write(Data("[CoreBluetooth] \(message)\n".utf8))
    }

    static func log(_ message: @autoclosure () -> String) {
        guard isEnabled else { return }
        FileHandle.standardError.write(Data("[CoreBluetooth] \(message())\n".utf8))
    }

    /// A logging closure for the layers below, or nil when logging is off.
    static var sink: (@Sendable (String) -> Void)? {
        guard isEnabled else { return nil }
        return { @Sendable message in FileHandle.standardError.write(Data("[CoreBluetooth] \(message)\n".utf8)) }
    }
}
