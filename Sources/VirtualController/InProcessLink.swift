import HCI
import HCITransport
import Scheduling

/// Two connected transport ends in one process: a host opens one, a controller the other.
/// A packet sent on one end is delivered to the other end's sink on that end's loop, after the
/// current job (never re-entrantly).
public final class InProcessHCILink: Sendable {
    public let hostEnd: End
    public let controllerEnd: End

    public init() {
        hostEnd = End()
        controllerEnd = End()
        // Before either end is published (by this initialiser's return): read without a lock.
        hostEnd.peer = controllerEnd
        controllerEnd.peer = hostEnd
    }

    public final class End: HCITransport, @unchecked Sendable {
        struct State {
            var loop: EventLoop?
            /// The sink, from `open` until the end closes: the sink's owner holds this end (a
            /// driver holds its transport), so that the two, and all they hold, would otherwise
            /// keep each other forever. The box is retained per delivery instead of the sink,
            /// which is typically weakly referenced too (a retain through its side table).
            var sink: SinkBox?
            var closed = false
            /// Packets that arrived and are not delivered yet: before this end opened (as a
            /// socket would hold them), or waiting for the delivery job.
            var arrived = RingBuffer<HCIPacket>(capacity: 4)
            /// Whether a delivery job is posted and has not yet taken `arrived`: one job
            /// delivers every packet that arrived before it ran (as a host reading a socket
            /// takes all it holds), so a packet costs no job, closure or lock of its own.
            var deliveryPosted = false
        }
        let state = Locked(State())
        /// The delivery job's buffer, swapped with `arrived` so that both keep their storage.
        /// Used only by that job, on the loop.
        private nonisolated(unsafe) var delivering = RingBuffer<HCIPacket>(capacity: 4)
        /// The other end: set by `InProcessHCILink.init`, before any other thread sees either
        /// end, and cleared on the loop when this end closes (a send, on the same loop, takes no
        /// lock for it).
        fileprivate(set) nonisolated(unsafe) var peer: End?

        final class SinkBox: Sendable {
            let sink: HCIPacketSink
            init(_ sink: HCIPacketSink) { self.sink = sink }
        }

        public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
            let post: Bool? = state.withLock { state in
                guard !state.closed else { return nil }
                state.loop = loop
                state.sink = SinkBox(sink)
                guard !state.arrived.isEmpty, !state.deliveryPosted else { return false }
                state.deliveryPosted = true
                return true
            }
            guard let post else { throw HCITransportError("in-process HCI link is closed") }
            if post { loop.execute { self.deliverArrived() } }
        }

        /// Closing closes both ends (`close(peerError:)`), so the other end's check in
        /// `deliver` stands for this one's.
        public func send(_ packet: consuming HCIPacket) {
            peer?.deliver(packet)
        }

        func deliver(_ packet: consuming HCIPacket) {
            let loop: EventLoop? = state.withLock(moving: packet) { state, packet in
                guard !state.closed else { return nil }
                state.arrived.append(packet)
                guard !state.deliveryPosted, let loop = state.loop else { return nil }
                state.deliveryPosted = true
                return loop
            }
            loop?.execute { self.deliverArrived() }
        }

        /// On the loop: hands every packet that arrived to the sink, oldest first.
        private func deliverArrived() {
            var packets = RingBuffer<HCIPacket>(capacity: 4)
            swap(&packets, &delivering)
            let box: SinkBox? = state.withLock { state in
                state.deliveryPosted = false
                swap(&state.arrived, &packets)
                return state.sink
            }
            if let box {
                while let packet = packets.popFirst() { box.sink.receive(packet) }
            } else {
                packets.removeAll()
            }
            delivering = packets
        }

        /// Closes both ends: this sink hears `nil`, the other end's sink hears `error`.
        public func close() { close(peerError: HCITransportError("the other end closed the HCI link")) }

        public func close(peerError: HCITransportError) {
            closeOne(nil)
            peer?.closeOne(peerError)
        }

        func closeOne(_ error: HCITransportError?) {
            let opened: (EventLoop, SinkBox)? = state.withLock { state in
                guard !state.closed else { return nil }
                state.closed = true
                guard let loop = state.loop, let sink = state.sink else { return nil }
                return (loop, sink)
            }
            guard let (loop, box) = opened else { return }
            loop.execute {
                box.sink.transportClosed(error)
                // Nothing goes through a closed end again: it lets go of its sink and of the
                // other end, which would otherwise keep each other (and the host and
                // controller behind them) forever.
                self.state.withLock { $0.sink = nil }
                self.peer = nil
            }
        }
    }
}
