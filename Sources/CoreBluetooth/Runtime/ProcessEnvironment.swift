import Foundation

/// The few environment variables a manager reads as it starts, looked up one by one.
///
/// `ProcessInfo.processInfo.environment` builds a dictionary of every variable each time it is
/// read (about 340,000 instructions with 40 variables): a quarter of the CPU a process spent
/// setting up 10,000 connections, since every manager read it. `getenv` for the handful of names
/// a manager needs costs next to nothing, and still sees a variable set after launch.
enum ProcessEnvironment {
    /// The variables among `names` that are set, as the dictionary the choosers take.
    static func values(of names: [String]) -> [String: String] {
        var values: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { values[name] = String(cString: value) }
        }
        return values
    }

    /// One variable, nil when unset.
    static func value(of name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }
}
