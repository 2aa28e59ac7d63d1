import ATT
import HCI
import L2CAP

/// What the GATT server needs from one client's ATT bearer. The bearer answers Exchange MTU
/// itself, passes requests to `GATTServer.handle(_:from:respond:)` and commands to
/// `GATTServer.handleCommand(_:from:)`, tells the server when its send queue has room again
/// (`GATTServer.connectionIsReadyToSend(_:)`) and when it closes (`connectionClosed(_:)`).
/// `GATTServer.attach(_:)` does all of that for an `ATTBearer`.
public protocol GATTServerConnection: AnyObject {
    /// ATT_MTU as negotiated (23 before an exchange).
    var mtu: Int { get }
    /// The link's current security level; permission checks compare against it.
    var securityLevel: LESecurityLevel { get }
    /// Whether a key to encrypt the link with exists (a bond), so that an access needing
    /// encryption on an unencrypted link is answered Insufficient Encryption (the client can just
    /// encrypt) rather than Insufficient Authentication (it must pair first).
    var hasEncryptionKey: Bool { get }
    /// Sends a Handle Value Notification of `bytes` (valid only during the call) cut to
    /// ATT_MTU − 3. False when the send queue is full (nothing sent); the server is then told
    /// through `GATTServer.connectionIsReadyToSend(_:)` once there is room.
    func notify(handle: ATTHandle, bytes: UnsafeRawBufferPointer) -> Bool
    /// Sends a Handle Value Indication of `value` cut to ATT_MTU − 3 (when it goes out: it may
    /// wait behind the one outstanding). `completion` gets true when the confirmation arrives,
    /// false when the indication cannot be confirmed (transaction timeout, link closed). The
    /// server hands over at most `GATTServer.indicationWindow` unconfirmed ones at a time.
    func indicate(handle: ATTHandle, value: [UInt8], completion: @escaping (Bool) -> Void)
}

extension GATTServerConnection {
    public var hasEncryptionKey: Bool { false }
}
