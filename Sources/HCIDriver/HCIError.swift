import ByteCoding
import HCI
import HCITransport

/// Why a command (or the driver) failed.
public enum HCIError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The controller answered with a non-success status.
    case status(HCIStatus, command: String)
    /// The controller never answered within the command's timeout.
    case timeout(command: String)
    /// The transport closed (or was never open): `nil` when closed locally.
    case transportClosed(HCITransportError?)
    /// The controller's answer could not be decoded.
    case malformed(DecodeError)
    /// The controller or the driver cannot do what was asked.
    case notSupported(String)
    /// The controller reset itself (a Hardware Error, or a Reset the host did not ask for):
    /// what was asked of it is lost; the driver initialises it again.
    case controllerReset(String)

    public var description: String {
        switch self {
        case .status(let status, let command): "\(command) failed: \(status)"
        case .timeout(let command): "\(command) timed out: the controller never answered"
        case .transportClosed(let error?): "transport closed: \(error)"
        case .transportClosed(nil): "transport closed"
        case .malformed(let error): "malformed answer: \(error)"
        case .notSupported(let what): "not supported: \(what)"
        case .controllerReset(let why): "the controller reset: \(why)"
        }
    }
}
