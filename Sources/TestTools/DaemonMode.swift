import Foundation

/// The suites' daemon mode (`CB_TEST_ON_DAEMON=1`, `scripts/test-daemon.sh`): every manager
/// that would be a device of its own on an in-process virtual radio is served by a daemon of
/// its own over a Unix socket instead (docs/daemon.md, "The suites on a daemon"). Tests that
/// cannot hold through a daemon by design say why with `.disabled(if: DaemonMode.isOn, …)`.
public enum DaemonMode {
    /// Whether this run puts the managers on daemons.
    public static let isOn = ProcessInfo.processInfo.environment["CB_TEST_ON_DAEMON"] == "1"
}
