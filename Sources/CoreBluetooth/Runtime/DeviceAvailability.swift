import Foundation
import Glibc
import HCITransport
import Scheduling

/// What a manager reports when its controller could not be opened, from the transport and the
/// system call's error: a pure function, so that every case is tested without root or a radio.
///
/// | transport, error | state | authorization | then |
/// | --- | --- | --- | --- |
/// | `hci:N`, EPERM/EACCES (no CAP_NET_ADMIN) | `.unauthorized` | `.denied` | stays |
/// | `hci:N`, ENODEV (no such index) | `.unsupported` | allowed | stays |
/// | `hci:N`, EAFNOSUPPORT (no Bluetooth in the kernel) | `.unsupported` | — | stays |
/// | `hci:N`, EBUSY (bluetoothd has it up) or EUSERS (another process has its user channel) | `.resetting` | allowed | retried; `.unsupported` after ``DeviceRetryPolicy/giveUpAfter`` |
/// | `hci:N`, ERFKILL (blocked) | `.poweredOff` | allowed | retried until unblocked |
/// | `serial:`/`unix:`, EPERM/EACCES | `.unauthorized` | `.denied` | stays |
/// | anything else (connection refused, no such file…) | `.unsupported` | — | stays |
///
/// The kernel checks CAP_NET_ADMIN before it looks the adapter up, so an ENODEV, EBUSY, EUSERS or
/// ERFKILL answer means the permission is there.
struct DeviceAvailability: Equatable, Sendable {
    var state: CBManagerState
    /// What the failure says about the process's permission to use the controller; nil when it
    /// says nothing (the check was not reached, or no permission is involved).
    var permission: CBManagerAuthorization?
    /// For `linuxUnavailableReason`: what happened and what to do.
    var reason: String
    /// Whether the manager tries again: the adapter is held or blocked, which another process
    /// or the user may change at any time.
    var retries: Bool

    /// Classifies a failed open. `message` is the transport's own description of the failure;
    /// `executable` is named in the `setcap` advice.
    static func classify(transport: TransportSpec?, errno code: Int32?, message: String,
                         executable: String) -> DeviceAvailability {
        let unsupported = DeviceAvailability(state: .unsupported, permission: nil, reason: message, retries: false)
        guard let transport, let code else { return unsupported }
        let name = errnoName(code)
        switch transport {
        case .hci(let index):
            let adapter = "hci\(index)"
            let release = "`sudo btmgmt --index \(index) power off` (or `sudo hciconfig \(adapter) down`)"
            switch code {
            case EPERM, EACCES:
                return DeviceAvailability(
                    state: .unauthorized, permission: .denied,
                    reason: "\(adapter): this process may not use the HCI user channel (\(name)): it needs "
                        + "CAP_NET_ADMIN. Grant it with `sudo setcap cap_net_admin+ep \(executable)`, or run as "
                        + "root; bluetoothd must also release the adapter: \(release).",
                    retries: false)
            case ENODEV:
                return DeviceAvailability(
                    state: .unsupported, permission: .allowedAlways,
                    reason: "\(adapter): no such Bluetooth adapter (\(name)); `btmgmt info` or `hciconfig -a` "
                        + "lists this machine's adapters.",
                    retries: false)
            case EAFNOSUPPORT, EPROTONOSUPPORT:
                return DeviceAvailability(
                    state: .unsupported, permission: nil,
                    reason: "\(adapter): this kernel has no Bluetooth support (\(name)); load it with "
                        + "`sudo modprobe bluetooth`, or use another transport (CB_TRANSPORT).",
                    retries: false)
            case EBUSY:
                return DeviceAvailability(
                    state: .resetting, permission: .allowedAlways,
                    reason: "\(adapter): the system's Bluetooth stack has the adapter up (\(name)): release it "
                        + "with \(release); retrying.",
                    retries: true)
            case EUSERS:
                return DeviceAvailability(
                    state: .resetting, permission: .allowedAlways,
                    reason: "\(adapter): another process has the adapter's user channel (\(name)); retrying "
                        + "until it lets go.",
                    retries: true)
            case ERFKILL:
                return DeviceAvailability(
                    state: .poweredOff, permission: .allowedAlways,
                    reason: "\(adapter): the adapter is blocked by rfkill (\(name)): `rfkill unblock "
                        + "bluetooth`; retrying.",
                    retries: true)
            default:
                return unsupported
            }
        case .serial(let device, _, _) where code == EPERM || code == EACCES:
            return DeviceAvailability(
                state: .unauthorized, permission: .denied,
                reason: "\(device): permission denied (\(name)): add the user to the device's group "
                    + "(`sudo usermod -aG dialout $USER`, then log in again) or run as root.",
                retries: false)
        case .unix(let path) where code == EPERM || code == EACCES:
            return DeviceAvailability(
                state: .unauthorized, permission: .denied,
                reason: "\(path): permission denied (\(name)): the socket's owner must let this user "
                    + "connect (`ls -l \(path)`).",
                retries: false)
        default:
            return unsupported
        }
    }

    /// A `.resetting` that lasted ``DeviceRetryPolicy/giveUpAfter``: `.unsupported`, no more
    /// retries.
    func givingUp(after duration: Duration) -> DeviceAvailability {
        var result = self
        result.state = .unsupported
        result.retries = false
        let trimmed = reason.hasSuffix("; retrying.") ? String(reason.dropLast("; retrying.".count)) + "." : reason
        result.reason = trimmed.replacingOccurrences(of: "; retrying until it lets go.", with: ".")
            + " Gave up after \(duration.components.seconds) s of retries; a new manager tries again."
        return result
    }

    /// Whether a transport needs a permission to open (so that opening it tells the process's
    /// authorization): the HCI user channel, a serial device, a Unix socket.
    static func needsPermission(_ transport: TransportSpec) -> Bool {
        switch transport {
        case .hci, .serial, .unix: true
        case .tcp, .virtual: false
        }
    }

    private static func errnoName(_ code: Int32) -> String {
        switch code {
        case EPERM: "EPERM"
        case EACCES: "EACCES"
        case ENODEV: "ENODEV"
        case EBUSY: "EBUSY"
        case EUSERS: "EUSERS"
        case ERFKILL: "ERFKILL"
        case EAFNOSUPPORT: "EAFNOSUPPORT"
        case EPROTONOSUPPORT: "EPROTONOSUPPORT"
        default: "errno \(code)"
        }
    }
}

/// How a manager retries a controller that is held or blocked (``DeviceAvailability/retries``).
///
/// iOS reports `.resetting` when its connection to the Bluetooth service is momentarily lost
/// and an update is imminent. An adapter held by bluetoothd or another process is reported
/// the same way and retried every `interval`; the manager goes `.poweredOn` as soon as an
/// attempt succeeds. A hold that lasts `giveUpAfter` is not momentary (bluetoothd keeps an
/// adapter it powered): the manager reports `.unsupported` with the reason and stops. A blocked
/// adapter (rfkill) is `.poweredOff`, which is not transient on iOS either: retried with no
/// limit, as the user may unblock it any time.
struct DeviceRetryPolicy: Sendable {
    var interval: Duration = .seconds(2)
    var giveUpAfter: Duration = .seconds(30)
}

/// The process's authorization to use Bluetooth, for the class property `CBManager.authorization`.
///
/// The last permission outcome a manager of this process learned opening a controller that
/// needs one (``DeviceAvailability/permission``; `.allowedAlways` when one opened). Before any
/// manager tried: when `CB_TRANSPORT` names an HCI adapter and the process lacks CAP_NET_ADMIN
/// (read from `/proc/self/status`), `.denied`, as iOS answers before a manager exists;
/// otherwise `.allowedAlways`.
enum ProcessAuthorization {
    static let learned = Locked<CBManagerAuthorization?>(nil)

    static var current: CBManagerAuthorization {
        if let learned = learned.current { return learned }
        if case .hci? = try? TransportSpec.fromEnvironment(), hasNetAdmin == false { return .denied }
        return .allowedAlways
    }

    /// Whether the process has CAP_NET_ADMIN in its effective set; nil if unknown. Read once:
    /// capabilities are set when the process starts.
    static let hasNetAdmin: Bool? = {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        return hasNetAdmin(status: status)
    }()

    /// CAP_NET_ADMIN (capability 12) in the `CapEff:` line of a `/proc/PID/status` text.
    static func hasNetAdmin(status: String) -> Bool? {
        for line in status.split(separator: "\n") where line.hasPrefix("CapEff:") {
            let hex = line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces)
            guard let mask = UInt64(hex, radix: 16) else { return nil }
            return mask & (1 << 12) != 0
        }
        return nil
    }
}
