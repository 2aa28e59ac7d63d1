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
            var sink: HCIPacketSink?
            var closed = false
            /// Packets that arrived and are not delivered yet: before this end opened (as a
            /// socket would hold them), or waiting for their loop job. Each job delivers the
            /// oldest, so packets keep their places among the loop's other jobs, and no job
            /// needs a closure of its own per packet.
            var arrived = RingBuffer<HCIPacket>(capacity: 4)
        }
        let state = Locked(State())
        /// `state.sink`, which is never cleared once set, in a box of its own for the delivery
        /// jobs: a sink is typically weakly referenced too, and retaining such an object goes
        /// through its side table, once per packet; the box is retained instead and its `let`
        /// is used without a retain. Set under `state`'s lock before any delivery job is posted.
        private nonisolated(unsafe) var openedSink: SinkBox?
        /// The other end: set once by `InProcessHCILink.init`, before any other thread sees
        /// either end, and never changed (a send takes no lock for it).
        fileprivate(set) nonisolated(unsafe) var peer: End?

        final class SinkBox {
            let sink: HCIPacketSink
            init(_ sink: HCIPacketSink) { self.sink = sink }
        }

        public func open(on loop: EventLoop, sink: HCIPacketSink) throws {
            let waiting: Int? = state.withLock { state in
                guard !state.closed else { return nil }
                state.loop = loop
                state.sink = sink
                openedSink = SinkBox(sink)
                return state.arrived.count
            }
            guard let waiting else { throw HCITransportError("in-process HCI link is closed") }
            if waiting > 0 { loop.execute { self.deliverArrived(waiting) } }
        }

        /// Closing closes both ends (`close(peerError:)`), so the other end's check in
        /// `deliver` stands for this one's.
        public func send(_ packet: HCIPacket) {
            peer?.deliver(packet)
        }

        func deliver(_ packet: HCIPacket) {
            let loop: EventLoop? = state.withLock { state in
                guard !state.closed else { return nil }
                state.arrived.append(packet)
                return state.loop
            }
            loop?.execute { self.deliverArrived(1) }
        }

        /// On the loop: hands the `count` oldest packets that arrived to the sink.
        private func deliverArrived(_ count: Int) {
            guard let box = openedSink else { return }
            for _ in 0..<count {
                guard let packet = state.withLock({ $0.arrived.popFirst() }) else { return }
                box.sink.receive(packet)
            }
        }

        /// Closes both ends: this sink hears `nil`, the other end's sink hears `error`.
        public func close() { close(peerError: HCITransportError("the other end closed the HCI link")) }

        public func close(peerError: HCITransportError) {
            closeOne(nil)
            peer?.closeOne(peerError)
        }

        func closeOne(_ error: HCITransportError?) {
            let opened: (EventLoop, HCIPacketSink)? = state.withLock { state in
                guard !state.closed else { return nil }
                state.closed = true
                guard let loop = state.loop, let sink = state.sink else { return nil }
                return (loop, sink)
            }
            guard let (loop, sink) = opened else { return }
            loop.execute { sink.transportClosed(error) }
        }
    }
}
