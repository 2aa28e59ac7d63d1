import CoreBluetooth
import Foundation
import Scheduling
import TestSupport
import Testing

/// Our central's delegate for the channel tests: finds a peer by name, keeps the channels it
/// opens, writes down the rest.
private final class ChannelCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let log = EventLog()
    let queue = DispatchQueue(label: "interop-channel-central")
    let name: String
    private let found = Locked<CBPeripheral?>(nil)
    private let opened = Locked<[CBL2CAPChannel]>([])
    private let errors = Locked<[any Error]>([])
    var peripheral: CBPeripheral? { found.current }
    var channels: [CBL2CAPChannel] { opened.current }
    var openErrors: [any Error] { errors.current }

    init(name: String) { self.name = name }

    func centralManagerDidUpdateState(_ central: CBCentralManager) { log.append("state \(central.state.rawValue)") }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard advertisementData[CBAdvertisementDataLocalNameKey] as? String == name, found.current == nil else { return }
        found.withLock { $0 = peripheral }
        log.append("discover")
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        log.append("connect")
    }

    func centralManager(_ central: CBCentralManager, didFailToConnect peripheral: CBPeripheral, error: Error?) {
        log.append("fail")
    }

    func centralManager(_ central: CBCentralManager, didDisconnectPeripheral peripheral: CBPeripheral, error: Error?) {
        log.append("disconnect")
    }

    func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        if let channel {
            opened.withLock { $0.append(channel) }
            log.append("opened \(channel.psm)")
        } else {
            errors.withLock { $0.append(error ?? CBError(.unknown)) }
            log.append("open failed \(error.map { "\($0)" } ?? "")")
        }
    }
}

/// Our peripheral manager's delegate for the channel tests: publishes on request, echoes
/// every channel a central opens (streams on `streams`' run loop).
private final class ChannelPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let queue = DispatchQueue(label: "interop-channel-peripheral")
    let streams = StreamRunLoopThread(name: "interop channel streams")
    private let published = Locked<CBL2CAPPSM?>(nil)
    private let echoList = Locked<[ChannelEcho]>([])
    var psm: CBL2CAPPSM? { published.current }
    var echoes: [ChannelEcho] { echoList.current }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }

    func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        guard error == nil else { return log.append("publish failed \(error.map { "\($0)" } ?? "")") }
        published.withLock { $0 = PSM }
        log.append("published \(PSM)")
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append("advertising\(error == nil ? "" : " error")")
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return log.append("open failed \(error.map { "\($0)" } ?? "")") }
        log.append("opened \(channel.psm)")
        echoList.withLock { $0.append(ChannelEcho(channel, on: streams.runLoop)) }
    }
}

extension CaptureFrames {
    /// The values of `fields` (first occurrence each, "" when absent) in the frames matching
    /// `filter`, a row per frame.
    func rows(_ fields: [String], where filter: String) throws -> [[String]] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tshark)
        process.arguments = ["-r", path, "-Y", filter, "-T", "fields", "-E", "occurrence=f"] + fields.flatMap { ["-e", $0] }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CaptureError(description: "tshark -Y \(filter) \(fields) failed") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
            .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    }

    /// The values of `field` in the frames matching `filter` (its first occurrence in each).
    func values(_ field: String, where filter: String) throws -> [Int] {
        try rows([field], where: filter).compactMap { $0.first.flatMap(Self.number) }
    }

    /// A field's text as tshark prints it: decimal, or 0x hex.
    static func number(_ text: String) -> Int? {
        text.hasPrefix("0x") ? Int(text.dropFirst(2), radix: 16) : Int(text)
    }
}

/// Issue 15: L2CAP LE credit-based channels (Apple's `openL2CAPChannel` and
/// `publishL2CAPChannel`) against Bumble's host, over linked Bumble controllers reached through
/// `tcp:`. Real time. Peers: interop/peers/bumble_coc_server.py and bumble_coc_client.py
/// (checked Bumble to Bumble by interop/peers/check_coc_peers.py).
@Suite("Interop: L2CAP channels with Bumble", .serialized)
struct ChannelInteropTests {
    static let bumblePSM: CBL2CAPPSM = 0x0081

    /// Lines a peer printed that start with `prefix`, each's second word as a number
    /// ("SDU 100" → 100).
    static func numbers(_ peer: PeerProcess, prefix: String) -> [Int] {
        peer.completeLines.filter { $0.hasPrefix(prefix + " ") }
            .compactMap { $0.split(separator: " ").dropFirst().first.flatMap { Int($0) } }
    }

    /// The keys=values of a peer's line ("OPENED psm=0x0081 mtu=4096 mps=247").
    static func fields(_ line: String?) -> [String: String] {
        Dictionary((line ?? "").split(separator: " ").compactMap { word -> (String, String)? in
            let parts = word.split(separator: "=", maxSplits: 1)
            return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
        }, uniquingKeysWith: { first, _ in first })
    }

    /// The Length field of each K-frame in the capture one side sent (host to controller:
    /// ours), on a dynamic channel: payload and SDU length field (Vol 3 Part A §3.4.3).
    /// Signaling commands are left out: an LE Flow Control Credit names a dynamic CID too.
    static func kFrameLengths(_ frames: CaptureFrames, ours: Bool) throws -> [Int] {
        try frames.values("btl2cap.length",
                          where: "frame.p2p_dir == \(ours ? 0 : 1) && btl2cap.cid >= 0x0040 && !btl2cap.cmd_code")
    }

    /// The results of the enhanced Credit Based Connection Responses (0x18) Bumble sent, in
    /// frame order, each one of `candidates`. Debian 12's tshark (4.0) names the enhanced
    /// commands only by code, so the result is read from the bytes: the L2CAP and command
    /// headers (4 + 4), MTU, MPS, Initial Credits, then Result at offset 14 (Vol 3 Part A §4.26).
    static func enhancedResults(_ frames: CaptureFrames, candidates: [Int] = [0, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12]) throws -> [Int] {
        try candidates.flatMap { code in
            try frames.numbers(String(format: "frame.p2p_dir == 1 && btl2cap.cmd_code == 0x18 && btl2cap[14:2] == %02x:00", code))
                .map { (frame: $0, code: code) }
        }.sorted { $0.frame < $1.frame }.map(\.code)
    }

    /// Our K-frames on the capture's one credit-based channel that went out with no credit
    /// left: Bumble's initial credits (its successful response: `initialCredits`, what the
    /// test gave Bumble's `--credits`, checked in the enhanced response's bytes) plus its LE
    /// Flow Control Credits seen so far, against one credit a K-frame (Vol 3 Part A §10.1).
    /// Frame numbers.
    static func kFramesBeyondCredits(_ frames: CaptureFrames, initialCredits: Int) throws -> [Int] {
        let sent = try frames.rows(["frame.number"], where: "frame.p2p_dir == 0 && btl2cap.cid >= 0x0040 && !btl2cap.cmd_code")
            .compactMap { $0.first.flatMap(Int.init) }.map { (frame: $0, credits: -1) }
        let opened = try frames.numbers(String(format: "frame.p2p_dir == 1 && btl2cap.cmd_code == 0x18 && btl2cap[14:2] == 00:00 && btl2cap[12:2] == %02x:%02x",
                                               initialCredits & 0xFF, initialCredits >> 8))
        let granted = try frames.rows(["frame.number", "btl2cap.credits"], where: "frame.p2p_dir == 1 && btl2cap.cmd_code == 0x16")
        guard opened.count == 1 else { return [-1] }  // no single successful response with those credits
        let grants = [(frame: opened[0], credits: initialCredits)] + granted.compactMap { row -> (frame: Int, credits: Int)? in
            guard row.count == 2, let frame = Int(row[0]), let credits = CaptureFrames.number(row[1]) else { return nil }
            return (frame, credits)
        }
        var credits = 0
        var beyond: [Int] = []
        for event in (sent + grants).sorted(by: { $0.frame < $1.frame }) {
            credits += event.credits
            if credits < 0 {
                beyond.append(event.frame)
                credits = 0
            }
        }
        return beyond
    }

    // MARK: Our central, Bumble's CoC server

    /// 1. Our central opens a channel to Bumble's echo server, whose MPS (64) is far below
    /// what our SDUs are: each SDU goes out segmented into K-frames of at most 64 bytes, and
    /// at most the server's MTU long. 10 KiB through the streams come back byte for byte.
    /// With the server's MTU 4096 our stream writes (2 KiB each) fit an SDU whole; with 100
    /// the stack cuts them to 100-byte SDUs.
    @Test(.serialized, arguments: [4096, 100])
    func ourCentralStreamsThroughBumblesEchoWithASmallMPS(serverMTU: Int) throws {
        let checks = Checks()
        var finished = false
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        defer { controllers.stop(failed: !checks.ok || !finished) }
        checks.check(controllers.waitFor("READY"), "controllers not ready")
        let name = "BumbleCoC\(serverMTU)"
        let server = try PeerProcess(script: "bumble_coc_server.py", arguments: [
            "tcp-client:127.0.0.1:\(ports[1])", "--name", name, "--psm", "0x0081", "--mtu", "\(serverMTU)", "--mps", "64",
            "--credits", "8",
        ])
        defer { server.stop(failed: !checks.ok || !finished) }
        checks.check(server.waitFor("READY"), "Bumble's server not ready")

        let capture = temporaryPath("channel-central-\(serverMTU).btsnoop")
        defer {
            if !checks.ok || !finished {
                Issue.record("capture \(capture) (`tshark -r FILE -Y btl2cap -V`)")
            } else if ProcessInfo.processInfo.environment["INTEROP_KEEP_CAPTURES"] != nil {
                print("capture \(capture)")
            } else {
                try? FileManager.default.removeItem(atPath: capture)
            }
        }
        let streams = StreamRunLoopThread(name: "interop channel streams")
        defer { streams.stop() }
        let delegate = ChannelCentral(name: name)
        var central: CBCentralManager? = CBCentralManager(delegate: delegate, queue: delegate.queue, options: [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
        ])
        checks.wait({ delegate.log.contains("state 5") }, "powered on")
        central?.scanForPeripherals(withServices: nil)
        checks.wait({ delegate.peripheral != nil }, "discovered \(name)")
        let peripheral = try #require(delegate.peripheral)
        central?.stopScan()
        central?.connect(peripheral)
        checks.wait({ delegate.log.contains("connect") }, "connected")
        checks.check(server.waitFor("CONNECTED"), "Bumble saw no connection")

        peripheral.openL2CAPChannel(Self.bumblePSM)
        checks.wait({ !delegate.channels.isEmpty || !delegate.openErrors.isEmpty }, "the channel's didOpen")
        checks.check(delegate.openErrors.isEmpty, "open failed: \(delegate.openErrors)")
        let channel = try #require(delegate.channels.first)
        checks.check(channel.psm, Self.bumblePSM, "the channel's PSM")
        checks.check(channel.peer === peripheral, "the channel's peer is not the peripheral")
        // Bumble's lines come through a pipe read on another thread: wait for the one wanted.
        server.waitFor("OPENED", timeout: .seconds(10))
        let opened = Self.fields(server.line(startingWith: "OPENED"))
        checks.check(opened["psm"], "0x0081", "the PSM Bumble saw")
        // Our side of the channel, as Bumble read it from our request.
        let ourMTU = Int(opened["mtu"] ?? "") ?? 0, ourMPS = Int(opened["mps"] ?? "") ?? 0
        checks.check(ourMTU >= serverMTU, "our MTU \(ourMTU) below the SDUs Bumble echoes (\(serverMTU))")
        checks.check((23...65533).contains(ourMPS), "our MPS \(ourMPS)")

        // 10 KiB out in 2 KiB writes, through Bumble's echo, and back.
        let payload = (0..<10_240).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 8) }
        let started = ContinuousClock.now
        let sender = ChannelSender(channel, payload: payload, chunk: 2048, on: streams.runLoop)
        checks.check(waitUntil(timeout: .seconds(60)) { sender.received.count >= payload.count || sender.error != nil },
                     "echo: \(sender.received.count) of \(payload.count) bytes back, stream error \(sender.error ?? "none")")
        let took = ContinuousClock.now - started
        checks.check(sender.received.count, payload.count, "bytes echoed")
        checks.check(sender.received == payload, "the echo differs from what was sent")
        checks.check(sender.error == nil, "stream error: \(sender.error ?? "")")

        // Bumble's view: whole SDUs within its MTU, none of our PDUs above its MPS.
        // Bumble prints each SDU's line before echoing it; the pipe may still hold the last.
        _ = waitUntil(timeout: .seconds(10)) { Self.numbers(server, prefix: "SDU").reduce(0, +) >= payload.count }
        let sdus = Self.numbers(server, prefix: "SDU")
        checks.check(sdus.reduce(0, +), payload.count, "bytes in the SDUs Bumble received (\(sdus))")
        checks.check(sdus.allSatisfy { $0 <= serverMTU }, "SDUs above Bumble's MTU \(serverMTU): \(sdus)")
        checks.check((sdus.max() ?? 0) > 62, "no SDU needed segmenting: \(sdus)")
        checks.check(server.count(prefix: "PDU-TOO-LARGE"), 0, "our PDUs above Bumble's MPS 64")
        print("channel to Bumble (MTU \(serverMTU), MPS 64): \(payload.count) bytes echoed in \(took), \(sdus.count) SDUs,"
              + " our MTU \(ourMTU) MPS \(ourMPS)")

        // Closing both streams closes the channel; Bumble sees it.
        sender.close()
        checks.check(server.waitFor("CLOSED"), "Bumble saw no channel close")
        central = nil
        checks.check(server.waitFor("DISCONNECTED"), "Bumble saw no disconnection")

        try checks.checkCapture(capture, smp: false)
        let frames = try CaptureFrames(capture)
        // Our K-frames: at most Bumble's MPS each, the SDU length field included.
        let ours = try Self.kFrameLengths(frames, ours: true)
        checks.check(!ours.isEmpty, "no K-frames of ours in the capture")
        checks.check(ours.allSatisfy { $0 <= 64 }, "K-frames of ours above MPS 64: \(Set(ours).sorted())")
        checks.check(ours.reduce(0, +), payload.count + 2 * sdus.count, "K-frame bytes we sent (payload and SDU length fields)")
        // Bumble's K-frames to us: within the MPS we asked for.
        let theirs = try Self.kFrameLengths(frames, ours: false)
        checks.check(theirs.allSatisfy { $0 <= ourMPS }, "Bumble's K-frames above our MPS \(ourMPS): \(Set(theirs).sorted())")
        // Both hosts support the enhanced credit-based mode: our central asks for it (0x17).
        checks.check(try frames.count("btl2cap.cmd_code == 0x17"), 1, "Credit Based Connection Requests")
        checks.check(try frames.count("btl2cap.cmd_code == 0x14"), 0, "LE Credit Based Connection Requests")
        checks.check(try Self.enhancedResults(frames), [0], "Credit Based Connection Response results")
        checks.check(try Self.kFramesBeyondCredits(frames, initialCredits: 8), [], "our K-frames sent without a credit")
        finished = true
    }

    /// 1, secured: Bumble's server wants an encrypted link (`--encrypt`) and refuses our
    /// first request with Insufficient Authentication; our central pairs (Just Works, LE Secure
    /// Connections), asks once more, and the channel opens, as on iOS. Bumble grants only 2
    /// credits at a time, so the 4 KiB through it wait on LE Flow Control Credits again and again.
    @Test func ourCentralPairsWhenBumbleRefusesForAuthentication() throws {
        let checks = Checks()
        var finished = false
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        defer { controllers.stop(failed: !checks.ok || !finished) }
        checks.check(controllers.waitFor("READY"), "controllers not ready")
        let name = "BumbleCoCSecure"
        let server = try PeerProcess(script: "bumble_coc_server.py", arguments: [
            "tcp-client:127.0.0.1:\(ports[1])", "--name", name, "--psm", "0x0081", "--mtu", "512", "--mps", "64",
            "--credits", "2", "--encrypt",
        ])
        defer { server.stop(failed: !checks.ok || !finished) }
        checks.check(server.waitFor("READY"), "Bumble's server not ready")

        let capture = temporaryPath("channel-central-secure.btsnoop")
        let bondDirectory = temporaryPath("bonds")
        defer { try? FileManager.default.removeItem(atPath: bondDirectory) }
        defer {
            if !checks.ok || !finished {
                Issue.record("capture \(capture) (`tshark -r FILE -Y 'btl2cap || btsmp' -V`)")
            } else {
                try? FileManager.default.removeItem(atPath: capture)
            }
        }
        let streams = StreamRunLoopThread(name: "interop channel streams")
        defer { streams.stop() }
        let delegate = ChannelCentral(name: name)
        var central: CBCentralManager? = CBCentralManager(delegate: delegate, queue: delegate.queue, options: [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
            CBManagerOptionLinuxBondDirectoryKey: bondDirectory,
        ])
        checks.wait({ delegate.log.contains("state 5") }, "powered on")
        central?.scanForPeripherals(withServices: nil)
        checks.wait({ delegate.peripheral != nil }, "discovered \(name)")
        let peripheral = try #require(delegate.peripheral)
        central?.stopScan()
        central?.connect(peripheral)
        checks.wait({ delegate.log.contains("connect") }, "connected")

        peripheral.openL2CAPChannel(Self.bumblePSM)
        checks.wait({ !delegate.channels.isEmpty || !delegate.openErrors.isEmpty }, seconds: 40, "the channel's didOpen")
        checks.check(delegate.openErrors.isEmpty, "open failed: \(delegate.openErrors)")
        let channel = try #require(delegate.channels.first)
        server.waitFor("OPENED", timeout: .seconds(10))  // its lines come through a pipe
        checks.check(server.line(startingWith: "REFUSED"), "REFUSED psm=0x0081 result=0x0005", "Bumble's first answer")
        checks.check(server.line(startingWith: "PAIRED"), "PAIRED sc 0", "Bumble's pairing")
        checks.check(server.count(prefix: "ENCRYPTED 1"), 1, "Bumble's encryptions")
        checks.check(server.count(prefix: "OPENED"), 1, "channels Bumble opened")
        checks.check(central?.linuxBonds.map(\.isSecureConnections) ?? [], [true], "our bond (SC)")

        let payload = (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
        let sender = ChannelSender(channel, payload: payload, chunk: 512, on: streams.runLoop)
        checks.check(waitUntil(timeout: .seconds(60)) { sender.received.count >= payload.count || sender.error != nil },
                     "echo: \(sender.received.count) of \(payload.count) bytes back, stream error \(sender.error ?? "none")")
        checks.check(sender.received == payload, "the echo differs from what was sent")
        // Bumble prints each SDU's line before echoing it; the pipe may still hold the last.
        _ = waitUntil(timeout: .seconds(10)) { Self.numbers(server, prefix: "SDU").reduce(0, +) >= payload.count }
        let sdus = Self.numbers(server, prefix: "SDU")
        checks.check(sdus.reduce(0, +), payload.count, "bytes in the SDUs Bumble received (\(sdus))")
        checks.check(sdus.allSatisfy { $0 <= 512 }, "SDUs above Bumble's MTU 512: \(sdus)")
        checks.check(server.count(prefix: "PDU-TOO-LARGE"), 0, "our PDUs above Bumble's MPS 64")
        sender.close()
        checks.check(server.waitFor("CLOSED"), "Bumble saw no channel close")
        central = nil

        try checks.checkCapture(capture, smp: true)
        let frames = try CaptureFrames(capture)
        checks.check(try frames.count("btl2cap.cmd_code == 0x17"), 2, "Credit Based Connection Requests (one retry)")
        checks.check(try Self.enhancedResults(frames), [5, 0], "Credit Based Connection Response results")
        checks.check(try frames.count("btsmp.opcode == 0x01"), 1, "Pairing Requests")
        let ours = try Self.kFrameLengths(frames, ours: true)
        checks.check(ours.allSatisfy { $0 <= 64 }, "K-frames of ours above MPS 64: \(Set(ours).sorted())")
        checks.check(try frames.count("btl2cap.cmd_code == 0x16 && frame.p2p_dir == 1") > 10, "Bumble's LE Flow Control Credits")
        checks.check(try Self.kFramesBeyondCredits(frames, initialCredits: 2), [], "our K-frames sent without a credit")
        finished = true
    }

    // MARK: Bumble's central, our peripheral manager

    /// Our peripheral manager with a published, encryption-required channel (and an echo on
    /// every channel opened to it), advertising `name`, on the first of two linked controllers.
    final class PeripheralRig: Checks, @unchecked Sendable {
        let controllers: PeerProcess
        let capture: String
        let bondDirectory = temporaryPath("bonds")
        fileprivate let delegate = ChannelPeripheral()
        var manager: CBPeripheralManager?
        let clientTransport: String
        let name: String
        var clients: [PeerProcess] = []
        private var finished = false

        init(name: String) throws {
            let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
            controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
            capture = temporaryPath("channel-peripheral-\(name).btsnoop")
            clientTransport = "tcp-client:127.0.0.1:\(ports[1])"
            self.name = name
            super.init()
            check(controllers.waitFor("READY"), "controllers not ready")
            let delegate = delegate
            manager = CBPeripheralManager(delegate: delegate, queue: delegate.queue, options: [
                CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
                CBManagerOptionLinuxBondDirectoryKey: bondDirectory,
            ])
            wait({ delegate.log.contains("state 5") }, "powered on")
            manager?.publishL2CAPChannel(withEncryption: true)
            wait({ delegate.psm != nil || delegate.log.all.contains { $0.hasPrefix("publish failed") } }, "published")
            manager?.startAdvertising([CBAdvertisementDataLocalNameKey: name])
            wait({ delegate.log.contains("advertising") }, "advertising")
        }

        var psm: CBL2CAPPSM { delegate.psm ?? 0 }

        /// Runs bumble_coc_client.py to its end (DONE or FAILED, its last line).
        func runClient(_ options: [String], timeout: Duration = .seconds(90)) throws -> PeerProcess {
            // Advertising resumes after a disconnection without a delegate callback: polled.
            let manager = manager
            check(waitUntil(timeout: .seconds(10)) { manager?.isAdvertising == true }, "not advertising")
            let client = try PeerProcess(script: "bumble_coc_client.py", arguments: [
                clientTransport, "--name", name, "--psm", String(format: "0x%04X", psm),
            ] + options)
            clients.append(client)
            let ended = waitUntil(timeout: timeout) { !client.process.isRunning }
            check(ended, "client \(options) did not end")
            // The rest of its output after the exit.
            _ = waitUntil(timeout: .seconds(5)) {
                client.completeLines.last.map { $0 == "DONE" || $0.hasPrefix("FAILED") } ?? false
            }
            return client
        }

        /// Ends the manager (the capture is complete then) and checks the capture.
        func finish(smp: Bool, _ checks: (CaptureFrames) throws -> Void = { _ in }) throws {
            manager = nil
            try checkCapture(capture, connections: true, smp: smp)
            try checks(try CaptureFrames(capture))
            finished = true
        }

        func stop() {
            let failed = !ok || !finished
            delegate.streams.stop()
            try? FileManager.default.removeItem(atPath: bondDirectory)
            for client in clients { client.stop(failed: failed) }
            controllers.stop(failed: failed)
            if failed {
                Issue.record("capture \(capture) (`tshark -r FILE -Y 'btl2cap || btsmp' -V`)")
            } else if ProcessInfo.processInfo.environment["INTEROP_KEEP_CAPTURES"] != nil {
                print("capture \(capture)")
            } else {
                try? FileManager.default.removeItem(atPath: capture)
            }
        }
    }

    static let clientSizes = [1, 62, 63, 100, 512, 1000, 4096]

    /// 2. A Bumble central pairs (Just Works, LE Secure Connections) and then opens our
    /// encryption-required channel: SDUs of every size (one K-frame, several, up to our MTU)
    /// come back whole through our stream echo, segmented within its MPS 64. Then a second
    /// Bumble run from the same address, keys forgotten (Bumble's keystore lived in the first
    /// process), opens without pairing: we hold a bond for it, so the refusal is Insufficient
    /// Encryption (0x0008).
    @Test func bumblePairsThenOpensOurEncryptedChannel() throws {
        let rig = try PeripheralRig(name: "SwiftCoCPair")
        defer { rig.stop() }
        let psm = rig.psm
        rig.check((0x0080...0x00FF).contains(psm), "published PSM 0x\(String(psm, radix: 16))")
        let started = ContinuousClock.now
        let sizes = Self.clientSizes.map(String.init).joined(separator: ",")
        let client = try rig.runClient(["--pair", "--sizes", sizes])
        let took = ContinuousClock.now - started
        rig.check(client.completeLines.last.map(String.init), "DONE", "the client's last line (\(client.completeLines))")
        rig.check(client.line(startingWith: "PAIRED"), "PAIRED sc 0", "Bumble's pairing")
        rig.check(client.count(prefix: "ENCRYPTED 1"), 1, "Bumble's encryptions")
        rig.check(client.count(prefix: "REFUSED"), 0, "refusals after pairing")
        let opened = Self.fields(client.line(startingWith: "OPENED"))
        rig.check(Int(opened["mtu"] ?? "").map { $0 >= Self.clientSizes.max()! } ?? false,
                  "our MTU as Bumble saw it: \(opened)")
        rig.check(client.completeLines.filter { $0.hasPrefix("ECHO") }.map(String.init), Self.clientSizes.map { "ECHO \($0) ok" },
                  "echoes")
        rig.check(client.count(prefix: "PDU-TOO-LARGE"), 0, "our PDUs above Bumble's MPS 64")
        rig.check(rig.delegate.echoes.count, 1, "channels our peripheral opened")
        let echo = rig.delegate.echoes.first
        rig.check(echo?.read, Self.clientSizes.reduce(0, +), "bytes our echo read")
        rig.check(echo?.written, Self.clientSizes.reduce(0, +), "bytes our echo wrote")
        rig.check(echo?.channel.psm, psm, "the channel's PSM")
        rig.check(echo?.channel.peer is CBCentral, "the channel's peer is not a CBCentral")
        rig.check(waitUntil(timeout: .seconds(10)) { echo?.ended == true }, "our echo saw no end of the channel")
        rig.check(rig.manager?.linuxBonds.map(\.isSecureConnections), [true], "our bond (SC)")
        print("Bumble paired, opened, \(Self.clientSizes.count) SDUs echoed in \(took)")

        // The same address again, without keys: we have a bond, the link is not encrypted.
        let second = try rig.runClient(["--sizes", "1", "--expect-refused", "0x0008"])
        rig.check(second.completeLines.last.map(String.init), "DONE", "the second client's last line (\(second.completeLines))")
        rig.check(second.line(startingWith: "REFUSED"), "REFUSED 0x0008", "the refusal of a bonded, unencrypted peer")
        rig.check(rig.delegate.echoes.count, 1, "channels our peripheral opened")

        try rig.finish(smp: true) { frames in
            rig.check(try frames.count("btsmp.opcode == 0x01"), 1, "Pairing Requests")
            rig.check(try frames.count("btl2cap.cmd_code == 0x14"), 2, "LE Credit Based Connection Requests")
            // Our answers: success (0), then Insufficient Encryption (8).
            rig.check(try frames.values("btl2cap.le_result", where: "btl2cap.cmd_code == 0x15"), [0, 8],
                      "LE Credit Based Connection Response results")
            let ours = try Self.kFrameLengths(frames, ours: true)
            rig.check(!ours.isEmpty, "no K-frames of ours in the capture")
            rig.check(ours.allSatisfy { $0 <= 64 }, "K-frames of ours above Bumble's MPS 64: \(Set(ours).sorted())")
        }
    }

    /// 2, unpaired: a Bumble central that does not pair is refused with Insufficient
    /// Authentication (0x0005); nothing reaches our delegate.
    @Test func unpairedBumbleIsRefusedOurEncryptedChannel() throws {
        let rig = try PeripheralRig(name: "SwiftCoCNoPair")
        defer { rig.stop() }
        let client = try rig.runClient(["--expect-refused", "0x0005"])
        rig.check(client.completeLines.last.map(String.init), "DONE", "the client's last line (\(client.completeLines))")
        rig.check(client.line(startingWith: "REFUSED"), "REFUSED 0x0005", "the refusal")
        rig.check(client.count(prefix: "PAIRED"), 0, "pairings")
        rig.check(client.count(prefix: "OPENED"), 0, "channels opened")
        rig.check(rig.delegate.echoes.isEmpty, "channels our peripheral opened: \(rig.delegate.echoes.count)")
        rig.check(!rig.delegate.log.all.contains { $0.hasPrefix("open failed") }, "a didOpen error for a refused peer")
        rig.check(rig.manager?.linuxBonds.isEmpty ?? false, "our bonds")
        try rig.finish(smp: false) { frames in
            rig.check(try frames.count("btl2cap.cmd_code == 0x14"), 1, "LE Credit Based Connection Requests")
            rig.check(try frames.values("btl2cap.le_result", where: "btl2cap.cmd_code == 0x15"), [5],
                      "LE Credit Based Connection Response results")
        }
    }
}
