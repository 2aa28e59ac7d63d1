import HCI
import L2CAP

/// What an `ATTBearer` needs from the L2CAP channel under it: whole SDUs out and in, the link
/// closing, back-pressure, and the link's security. `L2CAPFixedChannel` (the ATT fixed channel
/// 0x0004 of an LE-U link) is one; tests use a double.
///
/// The bearer takes over `onReceive`, `onClose` and `onCanSendMore`.
public protocol ATTChannel: AnyObject {
    /// Sends one SDU (one ATT PDU); false when the link is down or its queue refuses it.
    @discardableResult func send(_ sdu: [UInt8]) -> Bool
    /// Each SDU the peer sent, handed over (the receiver may take the SDU's buffer as its own:
    /// a notification's value is the SDU with the ATT header taken off in place).
    var onReceive: ((consuming [UInt8]) -> Void)? { get set }
    /// The link went down.
    var onClose: (() -> Void)? { get set }
    /// The link's outbound queue drained after PDUs had to wait.
    var onCanSendMore: (() -> Void)? { get set }
    /// PDUs of the link waiting for controller buffers.
    var queuedPDUs: Int { get }
    /// The link's security level now.
    var securityLevel: LESecurityLevel { get }
    /// Octets a sender may leave free at the front of an SDU for `send(reserved:)` to fill
    /// with the lower layer's header in place (0: none).
    var sduHeadroom: Int { get }
    /// Sends one SDU that starts with `sduHeadroom` octets to be overwritten: the PDU is built
    /// once, without a copy to put the header before it. Consumed: the header is written in
    /// the caller's buffer, which a borrowed array would make a copy of.
    @discardableResult func send(reserved sdu: consuming [UInt8]) -> Bool
    /// `send(reserved:)` if fewer than `limit` PDUs of the link wait for controller buffers
    /// (one look at the layer below instead of two).
    func send(reserved sdu: consuming [UInt8], ifQueuedBelow limit: Int) -> Bool
}

extension ATTChannel {
    public var sduHeadroom: Int { 0 }
    @discardableResult public func send(reserved sdu: consuming [UInt8]) -> Bool {
        send(sduHeadroom == 0 ? sdu : Array(sdu.dropFirst(sduHeadroom)))
    }
    public func send(reserved sdu: consuming [UInt8], ifQueuedBelow limit: Int) -> Bool {
        guard queuedPDUs < limit else { return false }
        return send(reserved: sdu)
    }
}

extension L2CAPFixedChannel: ATTChannel {}
