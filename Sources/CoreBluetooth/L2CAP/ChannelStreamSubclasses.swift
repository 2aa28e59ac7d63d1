import Foundation

// The two streams are thin: every call goes to the pair's `ChannelStreamCore`, which keeps all
// state behind one lock, so both are safe to use from any thread. Foundation's `InputStream`
// and `OutputStream` have no initialiser for subclasses but their concrete ones; the streams
// call the cheapest (an empty data stream, a memory stream) and override everything that would
// reach it.

/// The input stream of an L2CAP channel: what the peer sends, in order.
///
/// `read(_:maxLength:)` returns what is buffered (never blocking: 0 when nothing is, with
/// `streamStatus` still `.open`), 0 at the end of the stream, -1 after an error or before
/// `open()` or after `close()`. Released unclosed, it closes (as Foundation's streams do).
final class ChannelInputStream: InputStream, StreamDelegate {
    private let core: ChannelStreamCore

    init(core: ChannelStreamCore) {
        self.core = core
        super.init(data: Data())
        core.attach(self, as: .input)
    }

    deinit { core.close(.input) }

    override func open() { core.open(.input) }
    override func close() { core.close(.input) }

    /// The delegate, held weakly; the stream itself when none is set (Apple's default).
    override var delegate: (any StreamDelegate)? {
        get { core.delegate(of: .input) ?? self }
        set { core.setDelegate(newValue, of: .input) }
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        core.schedule(.input, in: aRunLoop, forMode: mode)
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        core.remove(.input, from: aRunLoop, forMode: mode)
    }

    override var streamStatus: Stream.Status { core.status(of: .input) }
    override var streamError: (any Error)? { core.streamError }
    override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        core.read(into: buffer, maxLength: len)
    }

    /// No direct access to the buffer (which is a queue of SDUs): read instead.
    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>, length len: UnsafeMutablePointer<Int>
    ) -> Bool { false }

    override var hasBytesAvailable: Bool { core.hasBytesAvailable }
}

/// The output stream of an L2CAP channel: what goes to the peer.
///
/// `write(_:maxLength:)` takes what fits in the send buffer and returns that count: 0 when it
/// is full (`.hasSpaceAvailable` comes again when room returns); -1 before `open()`, after
/// `close()`, after an error or once the peer has closed the channel. Released unclosed, it
/// closes (as Foundation's streams do).
final class ChannelOutputStream: OutputStream, StreamDelegate {
    private let core: ChannelStreamCore

    init(core: ChannelStreamCore) {
        self.core = core
        super.init(toMemory: ())
        core.attach(self, as: .output)
    }

    /// Only `ChannelStreams` makes these (`OutputStream.toMemory()` would come here).
    @available(*, unavailable)
    required init(toMemory: ()) { fatalError("a channel's output stream is made by ChannelStreams") }

    deinit { core.close(.output) }

    override func open() { core.open(.output) }
    override func close() { core.close(.output) }

    /// The delegate, held weakly; the stream itself when none is set (Apple's default).
    override var delegate: (any StreamDelegate)? {
        get { core.delegate(of: .output) ?? self }
        set { core.setDelegate(newValue, of: .output) }
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        core.schedule(.output, in: aRunLoop, forMode: mode)
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        core.remove(.output, from: aRunLoop, forMode: mode)
    }

    override var streamStatus: Stream.Status { core.status(of: .output) }
    override var streamError: (any Error)? { core.streamError }
    override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }

    override func write(_ buffer: UnsafePointer<UInt8>, maxLength len: Int) -> Int {
        core.write(from: buffer, maxLength: len)
    }

    override var hasSpaceAvailable: Bool { core.hasSpaceAvailable }
}
