import ArgumentParser
import CoreBluetooth
import Foundation

/// `cbtool channel`: an L2CAP credit-based channel to a device, from the terminal.
struct ChannelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract: "Open an L2CAP channel to a device, send standard input, print what arrives.",
        discussion: """
            The PSM is --psm, else the one the device publishes in Apple's L2CAP PSM characteristic \
            (ABDD3056-28FA-441D-A470-55A75A52553A), as iOS apps do. Each line of input goes out with its \
            newline; what arrives is printed as text, or in hex with --hex. After the end of input the \
            channel stays open until nothing has gone out or arrived for --seconds, then closes.
            Example: echo hello | cbtool channel EchoChannel
            """)

    @OptionGroup var target: TargetOptions
    @Option(name: .long, help: "The PSM (decimal, or hex with 0x); default: read from the device.")
    var psm: String?
    @Flag(name: .long, help: "Print what arrives in hex.")
    var hex = false
    @Option(name: .customLong("seconds"), help: "After the end of input, close once nothing went out or arrived for this long.")
    var quiet: Double = 2
    @OptionGroup var central: CentralOptions

    func validate() throws {
        if let psm { _ = try Self.parsePSM(psm) }
        if quiet < 0 { throw ValidationError("--seconds must not be negative") }
    }

    static func parsePSM(_ text: String) throws -> CBL2CAPPSM {
        let value = text.lowercased().hasPrefix("0x") ? UInt16(text.dropFirst(2), radix: 16) : UInt16(text)
        guard let value, (0x0001...0x00FF).contains(value) else {
            throw ValidationError("--psm must be an LE PSM, 1–255 (0x01–0xFF)")
        }
        return value
    }

    func run() throws {
        let session = try central.makeSession()
        let sighting = try target.connect(session)
        defer { session.disconnect(sighting.peripheral) }
        let peripheral = sighting.peripheral
        let chosen: CBL2CAPPSM
        if let psm {
            chosen = try Self.parsePSM(psm)
        } else {
            let uuid = CBUUID(string: CBUUIDL2CAPPSMCharacteristicString)
            let characteristic = try session.characteristic(uuid, of: peripheral)
            let value = try session.read(characteristic)
            guard value.count == 2 else { throw ToolError("the PSM characteristic holds \(value.count) bytes, not 2") }
            chosen = CBL2CAPPSM(value[0]) | CBL2CAPPSM(value[1]) << 8
        }
        let channel = try session.openChannel(chosen, on: peripheral)
        progress("channel open to PSM \(chosen) (0x\(String(chosen, radix: 16, uppercase: true)))")
        let context = ToolContext.current
        let pump = ChannelPump(channel, hex: hex, print: context.print)
        // Input blocks: read off this thread, whose run loop carries the streams.
        let reader = Thread {
            while let line = context.readLine() { pump.enqueue(Array((line + "\n").utf8)) }
            pump.inputEnded()
        }
        reader.start()
        let ended = pump.run(quietSeconds: quiet)
        if ended == .failed { throw ToolError("the channel failed: \(pump.failure ?? "unknown error")") }
        progress(ended == .peerClosed ? "the device closed the channel" : "channel closed")
    }
}

/// Moves bytes between a channel's streams, scheduled on the run loop of the thread that calls
/// `run`, and the terminal: queued input out, arrivals printed.
final class ChannelPump: NSObject, StreamDelegate, @unchecked Sendable {
    enum End { case quiet, peerClosed, failed }

    private let channel: CBL2CAPChannel
    private let hex: Bool
    private let print: @Sendable (String) -> Void
    // Under `lock`: what the input thread queued.
    private let lock = NSLock()
    private var pending: [UInt8] = []
    private var inputDone = false
    // On the run loop's thread only.
    /// When bytes last went out or came in: the quiet period counts from there.
    private var lastActivity = Date()
    private var end: End?
    private var text: [UInt8] = []
    private(set) var failure: String?

    init(_ channel: CBL2CAPChannel, hex: Bool, print: @escaping @Sendable (String) -> Void) {
        self.channel = channel
        self.hex = hex
        self.print = print
    }

    func enqueue(_ bytes: [UInt8]) { lock.withLock { pending += bytes } }
    func inputEnded() { lock.withLock { inputDone = true } }

    /// Runs the current run loop until the channel ends, or the input ended, went out, and
    /// nothing arrived for `quietSeconds`; then closes both streams.
    func run(quietSeconds: Double) -> End {
        for stream in [channel.inputStream! as Stream, channel.outputStream!] {
            stream.delegate = self
            stream.schedule(in: .current, forMode: .default)
            stream.open()
        }
        defer {
            flushText()
            channel.inputStream.close()
            channel.outputStream.close()
        }
        while end == nil {
            // Input arrives from another thread: look at it at least every 20 ms.
            _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.02))
            send()
            let (done, empty) = lock.withLock { (inputDone, pending.isEmpty) }
            if done && empty && Date().timeIntervalSince(lastActivity) >= quietSeconds { end = .quiet }
        }
        return end ?? .quiet
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.hasBytesAvailable) { receive() }
        if event.contains(.hasSpaceAvailable) { send() }
        if event.contains(.errorOccurred) {
            failure = (stream.streamError as NSError?).map { CentralSession.describe($0) }
            end = .failed
        }
        if event.contains(.endEncountered) {
            receive()
            if end == nil { end = .peerClosed }
        }
    }

    private func send() {
        guard channel.outputStream.hasSpaceAvailable else { return }
        let chunk = lock.withLock { Array(pending.prefix(4096)) }
        guard !chunk.isEmpty else { return }
        let written = channel.outputStream.write(chunk, maxLength: chunk.count)
        if written > 0 {
            lock.withLock { pending.removeFirst(written) }
            lastActivity = Date()
        }
    }

    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while channel.inputStream.hasBytesAvailable {
            let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            lastActivity = Date()
            if hex {
                print(buffer[0..<count].map { String(format: "%02x", $0) }.joined(separator: " "))
            } else {
                text += buffer[0..<count]
                printLines()
            }
        }
    }

    /// Whole lines as they complete (a line may come in several SDUs).
    private func printLines() {
        while let newline = text.firstIndex(of: 0x0A) {
            print(String(decoding: text[..<newline], as: UTF8.self))
            text.removeSubrange(...newline)
        }
    }

    private func flushText() {
        if !text.isEmpty { print(String(decoding: text, as: UTF8.self)) }
        text = []
    }
}
