import HCI
import Scheduling

/// Why a transport closed or could not open.
public struct HCITransportError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    /// The system call's error number when one failed (`EPERM`, `EBUSY`, `ECONNREFUSED`…), so
    /// that callers can tell a missing permission from a missing device; nil otherwise.
    public var errno: Int32?
    public init(_ message: String, errno: Int32? = nil) {
        self.message = message
        self.errno = errno
    }
    public var description: String { message }
}

/// The side that receives packets from a transport: a host driver (events, ACL) or a
/// controller (commands, ACL). Called on the loop given to `open`.
public protocol HCIPacketSink: AnyObject, Sendable {
    /// `packet` is handed over (consumed): its bytes may be reused in place above.
    func receive(_ packet: consuming HCIPacket)
    /// The transport closed: `nil` when closed locally, an error when it broke.
    func transportClosed(_ error: HCITransportError?)
}

/// A carrier of H4-framed HCI packets between a host and a controller.
///
/// Whatever the medium (an in-process virtual controller, TCP, a Unix socket, a UART, the Linux
/// HCI user channel), the host sees the same interface.
public protocol HCITransport: AnyObject, Sendable {
    /// Starts delivering received packets to `sink` on `loop`. Never waits on I/O: throws if
    /// the medium can't open at once; a transport that connects in the background (TCP, Unix
    /// sockets) reports a failed connection with `transportClosed(error)`.
    func open(on loop: EventLoop, sink: HCIPacketSink) throws
    /// Sends a packet without waiting: what the medium can't take yet is queued. Call on the
    /// loop given to `open`. Packets sent after the transport closed are dropped (the sink has
    /// been told it closed). The packet is moved in (the transport queues it or hands it on
    /// as it is: a borrowed one was copied, a retain and a release of its bytes per packet).
    func send(_ packet: consuming HCIPacket)
    /// Closes the transport; the sink is told with `transportClosed(nil)`.
    func close()
}
