import Foundation

/// What a channel's streams need from the L2CAP credit-based channel below them (the stack
/// side).
///
/// The streams call these from whatever thread the app reads, writes or closes on, and from a
/// run loop's thread; the implementation hops to its own loop. The streams hold no lock while
/// calling, so an implementation may call back into ``ChannelStreams`` at once. Calls arrive
/// one at a time, in the order the streams decided them (a pause before the resume that
/// follows it, bytes in the order they were written).
protocol ChannelStreamTransport: AnyObject, Sendable {
    /// Bytes the app wrote, in order: send them as SDUs of at most the peer's MTU, and call
    /// ``ChannelStreams/sent(_:)`` with the count as they leave the send buffer (handed to
    /// L2CAP), which gives the app its room back. Never empty.
    func streamsWrote(_ bytes: [UInt8])
    /// `true`: the app has more than the high-water mark unread, stop granting the peer
    /// credits; `false`: it has read below the low-water mark (or closed its input stream),
    /// grant them again. Alternates, starting with `true`.
    func streamsSetReceivePaused(_ paused: Bool)
    /// The app closed both streams (or released them unclosed): close the channel. Called at
    /// most once, also after ``ChannelStreams/peerClosed()`` or ``ChannelStreams/failed(_:)``.
    func streamsClosed()
}

/// The Foundation stream pair of one L2CAP channel, which `CBL2CAPChannel` hands to the app,
/// and the stack side's handle on it.
///
/// Bytes flow up through ``received(_:)`` into the input stream's buffer and out of it through
/// `read(_:maxLength:)`; down through the output stream's `write(_:maxLength:)`, which takes
/// what fits in the send buffer (at most `sendBufferLimit` bytes not yet ``sent(_:)``) and passes
/// it on at once with ``ChannelStreamTransport/streamsWrote(_:)``. The send buffer is thus the
/// transport's queue, which the streams only count.
///
/// Apps use the streams as Apple's: poll them from any thread, or schedule them on run loops
/// with a `StreamDelegate`, which then hears `stream(_:handle:)` on those run loops' threads
/// in the scheduled modes (see `ChannelStreamCore` for how on swift-corelibs-foundation).
///
/// The stack side calls ``received(_:)``, ``sent(_:)``, ``peerClosed()`` and ``failed(_:)``
/// from its loop thread (any thread works).
///
/// The transport is held weakly: the stack side keeps it (the channel) while the channel is
/// open; writes after it is gone go nowhere.
final class ChannelStreams: @unchecked Sendable {
    // @unchecked: `input` and `output` are immutable references to streams whose state all
    // lives in `core`, behind its lock (Foundation marks every stream non-Sendable, so the
    // subclasses cannot say so themselves).

    /// The stream of what the peer sends (a `ChannelInputStream`).
    let input: InputStream
    /// The stream of what goes to the peer (a `ChannelOutputStream`).
    let output: OutputStream
    /// What the stack side feeds; it holds the transport weakly and the streams not at all, so a
    /// stack side holding it keeps no stream the app let go of alive.
    let core: ChannelStreamCore

    /// The default bound of the send buffer: 64 KiB.
    static let defaultSendBufferLimit = 64 * 1024
    /// The default receive high-water mark: 256 KiB.
    static let defaultReceiveHighWater = 256 * 1024
    /// The default receive low-water mark: 64 KiB.
    static let defaultReceiveLowWater = 64 * 1024

    /// A stream pair over `transport`.
    /// - Parameters:
    ///   - sendBufferLimit: the most bytes written and not yet ``sent(_:)``.
    ///   - receiveHighWater: more unread bytes than this pauses receiving.
    ///   - receiveLowWater: fewer than this, once paused, resumes it.
    init(
        transport: any ChannelStreamTransport, sendBufferLimit: Int = defaultSendBufferLimit,
        receiveHighWater: Int = defaultReceiveHighWater, receiveLowWater: Int = defaultReceiveLowWater
    ) {
        precondition(sendBufferLimit > 0 && receiveLowWater >= 0 && receiveLowWater <= receiveHighWater)
        core = ChannelStreamCore(
            transport: transport, sendBufferLimit: sendBufferLimit, receiveHighWater: receiveHighWater,
            receiveLowWater: receiveLowWater)
        input = ChannelInputStream(core: core)
        output = ChannelOutputStream(core: core)
    }

    /// Bytes from the peer (one SDU, reassembled). Dropped once the input stream is closed,
    /// or after ``peerClosed()`` or ``failed(_:)``.
    func received(_ sdu: [UInt8]) { core.received(sdu) }

    /// The transport took `count` bytes off the send buffer (they went to L2CAP): the app may
    /// write that many more. More than are outstanding counts as all of them.
    func sent(_ count: Int) { core.sent(count) }

    /// The peer disconnected the channel, or the link went down: the input stream ends once
    /// its buffered bytes are read; the output stream ends at once (`.endEncountered`, status
    /// `.atEnd`, and `write` returns -1, as a Foundation stream past its end does).
    func peerClosed() { core.peerClosed() }

    /// The channel failed: both streams report `.errorOccurred`, status `.error`, and
    /// `streamError` is an `NSError` in `CBErrorDomain` (`error` itself when it is a
    /// `CBError`; else `CBError.Code.unknown` with `error` under `NSUnderlyingErrorKey`).
    /// Bytes not yet read are dropped; `read` and `write` return -1.
    func failed(_ error: any Error) { core.failed(error) }
}
