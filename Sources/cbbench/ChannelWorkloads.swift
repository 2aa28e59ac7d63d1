import CoreBluetooth
import Foundation
import HCI

// The L2CAP channel workloads of issue 15, through Apple's API only: a peripheral manager
// publishes a channel, a central opens it and streams bytes one way through the channel's
// output stream; the peripheral manager's side reads and counts. Both ends' streams are
// scheduled on one run-loop thread with a StreamDelegate, the way an app uses them.

let channelService = CBUUID(string: "6E400010-B5A3-F393-E0A9-E50E24DCCA9E")

/// A thread whose run loop carries the benchmark's streams.
final class StreamRunLoop: @unchecked Sendable {
    private let ready = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var stopped = false
    // Set once by the thread before `ready` is signalled.
    private var loop: RunLoop?

    init() {
        let thread = Thread { [self] in
            // A far timer keeps the loop sleeping rather than returning while nothing is scheduled.
            RunLoop.current.add(Timer(timeInterval: 3600, repeats: true) { _ in }, forMode: .default)
            loop = RunLoop.current
            ready.signal()
            while !lock.withLock({ stopped }) { _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.2)) }
        }
        thread.name = "bench streams"
        thread.start()
        ready.wait()
    }

    var runLoop: RunLoop { loop! }

    func stop() { lock.withLock { stopped = true } }
}

/// Wakes the driving thread when a stream end made progress.
final class StreamProgress: @unchecked Sendable {
    private let condition = NSCondition()

    func changed() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits (wall clock, at most `timeout`) until `done` holds; looks again at least every 10 ms.
    func wait(timeout: TimeInterval, until done: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !done() {
            if !condition.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.01))), Date() >= deadline { return done() }
        }
        return true
    }
}

/// Reads everything the channel's input stream has and counts it.
final class ChannelReader: NSObject, StreamDelegate, @unchecked Sendable {
    let channel: CBL2CAPChannel
    let received = Count()
    private let progress: StreamProgress
    /// Run-loop thread only.
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(_ channel: CBL2CAPChannel, on runLoop: RunLoop, progress: StreamProgress) {
        self.channel = channel
        self.progress = progress
        super.init()
        for stream in [channel.inputStream! as Stream, channel.outputStream!] {
            stream.delegate = self
            stream.schedule(in: runLoop, forMode: .default)
            stream.open()
        }
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        guard event.contains(.hasBytesAvailable) else { return }
        var total = 0
        let input = channel.inputStream!
        while input.hasBytesAvailable {
            let count = input.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            total += count
        }
        if total > 0 {
            received.add(total)
            progress.changed()
        }
    }
}

/// Writes the bytes it is given as the output stream takes them.
final class ChannelWriter: NSObject, StreamDelegate, @unchecked Sendable {
    let channel: CBL2CAPChannel
    private let runLoop: RunLoop
    private let chunk = [UInt8]((0..<16 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    private let lock = NSLock()
    /// Bytes still to write (`Int.max`: endless).
    private var left = 0

    init(_ channel: CBL2CAPChannel, on runLoop: RunLoop) {
        self.channel = channel
        self.runLoop = runLoop
        super.init()
        let output = channel.outputStream!
        output.delegate = self
        output.schedule(in: runLoop, forMode: .default)
        output.open()
    }

    /// Writes `count` more bytes (nil: endless, until `stop`).
    func send(_ count: Int?) {
        lock.withLock { left = count.map { left + $0 } ?? .max }
        onRunLoop { $0.write() }
    }

    /// Writes nothing more (what the stream took still goes).
    func stop() { lock.withLock { left = 0 } }

    /// Runs `body` on the run loop's thread: a timer due now (adding one is thread-safe and
    /// wakes the run loop; `RunLoop.perform` would not wake it).
    private func onRunLoop(_ body: @escaping @Sendable (ChannelWriter) -> Void) {
        runLoop.add(Timer(timeInterval: 0, repeats: false) { [self] _ in body(self) }, forMode: .default)
    }

    func stream(_ stream: Stream, handle event: Stream.Event) {
        if event.contains(.hasSpaceAvailable) || event.contains(.openCompleted) { write() }
    }

    private func write() {
        let output = channel.outputStream!
        var budget = lock.withLock { left }
        var total = 0
        while budget > 0, output.hasSpaceAvailable {
            let count = chunk.withUnsafeBufferPointer { output.write($0.baseAddress!, maxLength: min(budget, $0.count)) }
            guard count > 0 else { break }
            budget -= count
            total += count
        }
        if total > 0 { lock.withLock { if left != .max { left -= total } } }
    }
}

/// The peripheral manager's side: publishes an unencrypted channel, advertises, and keeps the
/// channel a central opens.
final class ChannelPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.channel.peripheral")
    private(set) var manager: CBPeripheralManager!
    private let lock = NSLock()
    private var psmStorage: CBL2CAPPSM?
    private var channelStorage: CBL2CAPChannel?
    var psm: CBL2CAPPSM? { lock.withLock { psmStorage } }
    var channel: CBL2CAPChannel? { lock.withLock { channelStorage } }

    init(radio: CBVirtualRadio) {
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBPeripheralManager(delegate: self, queue: queue) }
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        peripheral.publishL2CAPChannel(withEncryption: false)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        precondition(error == nil, "publish: \(error!)")
        lock.withLock { psmStorage = PSM }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: "chan", CBAdvertisementDataServiceUUIDsKey: [channelService]])
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { fatalError("incoming channel: \(String(describing: error))") }
        lock.withLock { channelStorage = channel }
    }
}

/// The central's side: finds the peripheral, connects, opens its channel (the PSM handed over
/// in-process; an app would read it from the PSM characteristic).
final class ChannelCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.channel.central")
    private(set) var manager: CBCentralManager!
    private let psm: () -> CBL2CAPPSM?
    private let lock = NSLock()
    private var channelStorage: CBL2CAPChannel?
    var channel: CBL2CAPChannel? { lock.withLock { channelStorage } }
    /// Queue-confined.
    private(set) var peripheral: CBPeripheral?

    init(radio: CBVirtualRadio, psm: @escaping () -> CBL2CAPPSM?) {
        self.psm = psm
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: self, queue: queue) }
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        guard central.state == .poweredOn else { return }
        central.scanForPeripherals(withServices: [channelService], options: nil)
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard self.peripheral == nil else { return }
        central.stopScan()
        self.peripheral = peripheral
        peripheral.delegate = self
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        guard let psm = psm() else { fatalError("connected before the channel was published") }
        peripheral.openL2CAPChannel(psm)
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { fatalError("open channel: \(String(describing: error))") }
        lock.withLock { channelStorage = channel }
    }
}

/// A central and a peripheral manager on one radio with a channel open between them.
struct ChannelPair {
    let radio: CBVirtualRadio
    let peripheral: ChannelPeripheral
    let central: ChannelCentral
    let streams = StreamRunLoop()
    let progress = StreamProgress()

    init(airTime: CBVirtualRadio.AirTime) {
        radio = CBVirtualRadio(clock: .virtual, seed: 7, airTime: airTime)
        let peripheral = ChannelPeripheral(radio: radio)
        guard radio.run(until: { peripheral.psm != nil }, timeout: .seconds(30)) else { fatalError("the channel was not published") }
        let central = ChannelCentral(radio: radio, psm: { peripheral.psm })
        guard radio.run(until: { central.channel != nil && peripheral.channel != nil }, timeout: .seconds(30)) else {
            fatalError("the channel did not open")
        }
        self.peripheral = peripheral
        self.central = central
    }

    /// The central's channel and the peripheral manager's.
    var ends: (central: CBL2CAPChannel, peripheral: CBL2CAPChannel) { (central.channel!, peripheral.channel!) }

    func close() {
        let (a, b) = ends
        for stream in [a.inputStream! as Stream, a.outputStream!, b.inputStream!, b.outputStream!] { stream.close() }
        streams.stop()
    }
}

/// Workload 7: `total` bytes through one channel, central → peripheral manager, instant air;
/// bytes per CPU second of the whole process (both stacks, both ends' streams). The radio's
/// clock stays stopped meanwhile: with instant air the bytes need no radio time, only work.
func apiChannelThroughput(total: Int) -> [Figure] {
    let pair = ChannelPair(airTime: .instant)
    let (out, into) = pair.ends
    let reader = ChannelReader(into, on: pair.streams.runLoop, progress: pair.progress)
    let writer = ChannelWriter(out, on: pair.streams.runLoop)
    // A warm-up: first-time costs (buffers growing, lazy metadata) out of the figure.
    let warmUp = min(total, 256 * 1024)
    writer.send(warmUp)
    guard pair.progress.wait(timeout: 600, until: { reader.received.value >= warmUp }) else {
        fatalError("channel warm-up: \(reader.received.value)/\(warmUp)")
    }
    let time = measureBoth {
        writer.send(total)
        guard pair.progress.wait(timeout: 3600, until: { reader.received.value >= warmUp + total }) else {
            fatalError("channel: \(reader.received.value - warmUp)/\(total)")
        }
    }
    precondition(reader.received.value == warmUp + total, "channel bytes: \(reader.received.value) ≠ \(warmUp + total)")
    pair.close()
    return [Figure(name: "channel_bytes_per_s", value: Double(total) / time.cpu, unit: "B/s",
                   note: "CBL2CAPChannel streams, central → peripheral manager, instant air, \(total / 1024) KiB (\(Int(Double(total) / time.wall / 1024)) KiB/s wall)")]
}

/// Workload 8: timed air, the timed workload's link (15 ms interval, 2M PHY, 251-byte data
/// length): the channel's one-way goodput in SDU bytes per second of radio time, against the
/// most SDU bytes the air-time model lets that link carry (`channelCeiling`). `reverse`: the
/// peripheral manager sends and the central reads (a diagnostic: the other direction of the
/// same link).
///
/// Radio time runs in slices of whole connection events; between slices (the clock stopped)
/// the writer's stream is filled and the reader has read everything. So the figure is the
/// stack's and the link's, not how soon this process's stream thread got a core while the
/// virtual clock ran (it does not wait for run-loop threads).
func apiTimedChannel(virtualSeconds: Int, reverse: Bool = false) -> [Figure] {
    let pair = ChannelPair(airTime: .timed)
    let (central, peripheral) = pair.ends
    // What an app does for throughput: the shortest interval; 2M (iOS asks by itself). The
    // 251-byte data length the host asks for on every connection.
    pair.peripheral.queue.sync {
        pair.peripheral.manager.setDesiredConnectionLatency(.low, for: peripheral.peer as! CBCentral)
    }
    pair.central.queue.sync { pair.central.peripheral!.linuxSetPHY(.le2M) }
    pair.radio.run(for: .seconds(2))
    let (out, into) = reverse ? (peripheral, central) : (central, peripheral)
    let reader = ChannelReader(into, on: pair.streams.runLoop, progress: pair.progress)
    let writer = ChannelWriter(out, on: pair.streams.runLoop)
    writer.send(nil)

    /// With the clock stopped: the writer's send buffer is full and the reader has read all.
    func settle() {
        var last = -1
        guard pair.progress.wait(timeout: 60, until: {
            let now = reader.received.value
            defer { last = now }
            return !out.outputStream.hasSpaceAvailable && !into.inputStream.hasBytesAvailable && now == last
        }) else { fatalError("timed channel: the streams did not settle") }
    }
    let interval = lowLatencyIntervalMicroseconds
    func advance(events: Int64) {
        var left = events
        while left > 0 {
            let slice = min(left, 20)
            settle()
            pair.radio.run(for: .microseconds(slice * interval))
            left -= slice
        }
        settle()
    }
    advance(events: 500_000 / interval)
    let before = reader.received.value
    let t0 = pair.radio.now
    // A whole number of connection events, so that the window holds no partial event.
    let events = Int64(virtualSeconds) * 1_000_000 / interval
    let time = measureBoth { advance(events: events) }
    let received = reader.received.value - before
    let elapsed = pair.radio.now - t0
    writer.stop()
    pair.close()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let goodput = Double(received) / seconds
    let ceiling = channelCeiling(intervalMicroseconds: interval, centralSends: !reverse)
    let name = reverse ? "timed_channel_reverse" : "timed_channel"
    let direction = reverse ? "peripheral manager → central" : "central → peripheral manager"
    var figures = [
        Figure(name: "\(name)_bytes_per_s", value: goodput, unit: "B/s",
               note: "SDU bytes, \(direction), \(interval / 1000) ms interval, 2M PHY, 251-byte PDUs, \(received) B in \(String(format: "%.2f", seconds)) s radio time (\(String(format: "%.2f", time.cpu)) s CPU)"),
    ]
    figures.append(Figure(name: "\(name)_ceiling_bytes_per_s", value: ceiling, unit: "B/s",
                          note: "the air-time model's ceiling in SDU bytes for that link and direction (see BENCHMARKS.md)"))
    figures.append(Figure(name: "\(name)_fraction_of_ceiling", value: goodput / ceiling, unit: "",
                          note: "\(name)_bytes_per_s / \(name)_ceiling_bytes_per_s"))
    return figures
}

/// The most SDU bytes per second a credit-based channel can carry one way on a 2M link with
/// 251-byte PDUs in the radio's air-time model, counted as `linkLayerCeiling` counts ATT value
/// bytes: the most K-frame payload one connection event can carry (`kFramePayloadPerEvent`),
/// and the 2-byte SDU length once per SDU of `mtu` bytes (the peer's MTU, the size our streams
/// cut SDUs to).
func channelCeiling(intervalMicroseconds: Int64, centralSends: Bool, mtu: Int = 4096, mps: Int = 247) -> Double {
    let payload = kFramePayloadPerEvent(intervalNanoseconds: intervalMicroseconds * 1000, centralSends: centralSends, mps: mps)
    return Double(payload) * Double(mtu) / Double(mtu + 2) / (Double(intervalMicroseconds) / 1e6)
}

/// The most K-frame payload bytes one connection event carries one way under the virtual
/// central's rule (`VirtualController`, `connectionEventReceived`): the central starts another
/// exchange only if its next PDU, T_IFS, the longest reply the peripheral may send (2 + 251
/// octets) and T_IFS fit, after T_IFS, before the event ends. An exchange is the sender's data
/// PDU (2-byte LL header, 4-byte L2CAP header, the payload), T_IFS, the receiver's empty PDU,
/// or the other way round. Air time is linear in the payload, so for n exchanges the rule
/// bounds the payload before the last start: n full K-frames when they fit, else what the
/// bound leaves. Not only whole K-frames: when the peripheral sends, a short K-frame earlier
/// in the event (an SDU's last) can leave room for one more full exchange.
func kFramePayloadPerEvent(intervalNanoseconds interval: Int64, centralSends: Bool, mps: Int) -> Int {
    let ifs: Int64 = 150_000
    let phy = LEPHY.le2M
    let emptyPDU = phy.airTimeNanoseconds(pduOctets: 2)
    let bareKFrame = phy.airTimeNanoseconds(pduOctets: 2 + 4)
    let perByte = phy.airTimeNanoseconds(pduOctets: 2 + 4 + 1) - bareKFrame
    let longestReply = phy.airTimeNanoseconds(pduOctets: 2 + 251)
    var best = mps  // the first exchange starts at the anchor whatever fits
    var n = 2
    while true {
        // The end of exchange n − 1 with no payload, then the budget for exchange n.
        let before = Int64(n - 1) * (bareKFrame + ifs + emptyPDU) + Int64(n - 2) * ifs
        let budget = 3 * ifs + longestReply + (centralSends ? bareKFrame : emptyPDU)
        let room = interval - before - budget
        guard room >= 0 else { break }
        // Central sends: the bound covers all n payloads (the nth PDU is in the budget).
        // Peripheral sends: it covers the first n − 1; the nth reply is budgeted in full.
        let bounded = Int(room / perByte)
        let payload = centralSends ? min(n * mps, bounded) : mps + min((n - 1) * mps, bounded)
        best = max(best, payload)
        n += 1
    }
    return best
}
