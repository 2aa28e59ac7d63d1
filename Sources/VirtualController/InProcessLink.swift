import HCI
import HCITransport
import Scheduling
import Synchronization

/// Two connected transport ends in one process: a host opens one, a controller the other.
/// A packet sent on one end is delivered to the other end's sink on that end's loop, after the
/// current job (never re-entrantly).
public final class InProcessHCILink: Sendable {
    public let hostEnd: End
    public let controllerEnd: End

    public init() {
        hostEnd = End()
        controllerEnd = End()
        hostEnd.peer.withLock { $0 = controllerEnd }
        controllerEnd.peer.withLock { $0 = hostEnd }
    }

    public final class End: HCITransport, @unchecked Sendable {
        struct Opened {
            var loop: EventLoop
            var sink: HCIPacketSink
        }
        let peer = Mutex<End?>(nil)
        let state = Mutex<Opened?>(nil)
        let closed = Mutex(false)
        /// What arrived before this end opened, as a socket would hold it.
        let early = Mutex<[HCIPacket]>([])

        public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
            if closed.withLock({ $0 }) { throw HCITransportError("in-process HCI link is closed") }
            let waiting = early.withLock { packets in
                state.withLock { $0 = Opened(loop: loop, sink: sink) }
                defer { packets = [] }
                return packets
            }
            if !waiting.isEmpty { loop.execute { for packet in waiting { sink.receive(packet) } } }
        }

        public func send(_ packet: HCIPacket) {
            guard !closed.withLock({ $0 }), let peer = peer.withLock({ $0 }) else { return }
            peer.deliver(packet)
        }

        func deliver(_ packet: HCIPacket) {
            guard !closed.withLock({ $0 }) else { return }
            let opened: Opened? = early.withLock { packets in
                guard let opened = state.withLock({ $0 }) else {
                    packets.append(packet)
                    return nil
                }
                return opened
            }
            guard let opened else { return }
            let sink = opened.sink
            opened.loop.execute { sink.receive(packet) }
        }

        /// Closes both ends: this sink hears `nil`, the other end's sink hears `error`.
        public func close() { close(peerError: HCITransportError("the other end closed the HCI link")) }

        public func close(peerError: HCITransportError) {
            closeOne(nil)
            peer.withLock { $0 }?.closeOne(peerError)
        }

        func closeOne(_ error: HCITransportError?) {
            let wasClosed = closed.withLock { c in defer { c = true }; return c }
            guard !wasClosed, let opened = state.withLock({ $0 }) else { return }
            let sink = opened.sink
            opened.loop.execute { sink.transportClosed(error) }
        }
    }
}
