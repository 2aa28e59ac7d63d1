import CoreBluetooth
import Foundation

/// Echoes everything that arrives on a channel's input stream back on its output stream, on a
/// thread of its own whose run loop carries the streams, until the channel ends.
final class StreamEcho: NSObject, StreamDelegate, @unchecked Sendable {
    // On the echo's thread only.
    private let channel: CBL2CAPChannel
    private var pending: [UInt8] = []
    private var echoed = 0
    private var ended = false

    private init(_ channel: CBL2CAPChannel) {
        self.channel = channel
    }

    /// Starts echoing; `done` gets the byte count once the channel ends (on the echo's thread).
    static func start(_ channel: CBL2CAPChannel, done: @escaping @Sendable (Int) -> Void) {
        let echo = StreamEcho(channel)
        let thread = Thread {
            for stream in [channel.inputStream! as Stream, channel.outputStream!] {
                stream.delegate = echo
                stream.schedule(in: .current, forMode: .default)
                stream.open()
            }
            while !echo.ended { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 1)) }
            channel.inputStream.close()
            channel.outputStream.close()
            done(echo.echoed)
        }
        thread.name = "cbtool.l2cap-echo"
        thread.start()
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.hasBytesAvailable) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while channel.inputStream.hasBytesAvailable {
                let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
                guard count > 0 else { break }
                pending += buffer[0..<count]
            }
        }
        if event.contains(.endEncountered) || event.contains(.errorOccurred) { ended = true }
        while !pending.isEmpty, channel.outputStream.hasSpaceAvailable {
            let written = channel.outputStream.write(pending, maxLength: pending.count)
            guard written > 0 else { break }
            pending.removeFirst(written)
            echoed += written
        }
    }
}
