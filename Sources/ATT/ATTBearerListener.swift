import Scheduling

/// What the users of one `ATTBearer` — its GATT server, its GATT client, the role that owns the
/// link — hear about the bearer as a whole. Each registers with `ATTBearer.addListener(_:)`;
/// every listener hears every event, in the order they registered. Every method does nothing by
/// default, so a listener implements only what it needs.
///
/// Requests and commands are not fanned out: they go to the bearer's one `onRequest` and
/// `onCommand` handler (the server); notifications and indications to its one client handler.
///
/// The bearer holds its listeners weakly: a listener that goes away stops hearing, and a
/// listener may hold the bearer strongly without a cycle. Called on the bearer's loop.
public protocol ATTBearerListener: AnyObject {
    /// An Exchange MTU (in either role) changed ATT_MTU to `mtu`.
    func attBearerMTUDidChange(to mtu: Int)
    /// `sendCommand` or `notify` returned false earlier and the link can take more now.
    func attBearerIsReadyToSend()
    /// The bearer closed, after every pending operation failed; called once.
    func attBearerDidClose(_ reason: ATTBearer.CloseReason)
}

extension ATTBearerListener {
    public func attBearerMTUDidChange(to mtu: Int) {}
    public func attBearerIsReadyToSend() {}
    public func attBearerDidClose(_ reason: ATTBearer.CloseReason) {}
}

/// A weak reference to a listener (a struct, so the list is one array, iterated in place).
struct ATTBearerListenerSlot {
    @WeakHeldExistential var listener: (any ATTBearerListener)?
}
