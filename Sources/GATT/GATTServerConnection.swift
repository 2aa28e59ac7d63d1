import ATT
import HCI
import L2CAP

/// What the GATT server needs from one client's ATT bearer. The bearer answers Exchange MTU
/// itself, passes requests to `GATTServer.handle(_:from:respond:)` and commands to
/// `GATTServer.handleCommand(_:from:)`, and tells the server when it closes.
public protocol GATTServerConnection: AnyObject {
    /// ATT_MTU as negotiated (23 before an exchange).
    var mtu: Int { get }
    /// The link's current security level; permission checks compare against it.
    var securityLevel: LESecurityLevel { get }
    /// Whether a key to encrypt the link with exists (a bond), so that an access needing
    /// encryption on an unencrypted link is answered Insufficient Encryption (the client can just
    /// encrypt) rather than Insufficient Authentication (it must pair first).
    var hasEncryptionKey: Bool { get }
    /// Sends a Handle Value Notification. False when the send queue is full (nothing sent);
    /// the bearer then calls `GATTServer.connectionIsReadyToSend(_:)` once there is room.
    func notify(handle: ATTHandle, value: [UInt8]) -> Bool
    /// Sends a Handle Value Indication. `completion` gets true when the confirmation arrives,
    /// false when the indication cannot be confirmed (transaction timeout, link closed). The
    /// server sends one at a time per connection.
    func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Bool) -> Void)
}

extension GATTServerConnection {
    public var hasEncryptionKey: Bool { false }
}
