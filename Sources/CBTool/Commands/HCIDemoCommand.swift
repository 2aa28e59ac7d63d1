import ArgumentParser
import Foundation
import HCI
import HCIDriver
import HCITransport
import Scheduling
import VirtualController

/// The first thing to run: two devices on the embedded virtual radio doing what every BLE
/// connection does, over real HCI, with our host driver on both sides.
struct HCIDemoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hci-demo",
        abstract: "Two virtual controllers driven over raw HCI: advertise, scan, connect, exchange MTU, encrypt, disconnect.")

    func run() throws {
        let loop = EventLoop(name: "demo", pacing: .manual)
        let radio = VirtualRadio(loop: loop, airTime: .instant, seed: 42)
        let peripheralAddress = BluetoothAddress("C0:EC:40:5E:00:01")!
        let peripheral = DemoHost(name: "EchoServer", loop: loop, transport: VirtualController(
            radio: radio, address: peripheralAddress, position: RadioPosition(x: 2)).makeHostTransport())
        let centralTransport = try Snoop.wrapFromEnvironment(VirtualController(
            radio: radio, address: BluetoothAddress("C0:CE:47:2A:00:02")!).makeHostTransport())
        let central = DemoHost(name: "Central", loop: loop, transport: centralTransport)

        for host in [peripheral, central] {
            let info = try host.start()
            host.say("controller ready: address \(info.address), HCI version 0x\(String(info.hciVersion, radix: 16)), "
                     + "ACL buffers \(info.totalACLDataPackets) × \(info.aclDataPacketLength) bytes")
        }

        // The peripheral advertises its name, connectable, every 100 ms.
        let name = Array("EchoServer".utf8)
        try peripheral.command(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x00A0, advertisingIntervalMax: 0x00A0, advertisingType: .advInd,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll))
        try peripheral.command(LESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06, UInt8(name.count + 1), 0x09] + name))
        try peripheral.command(LESetScanResponseData(scanResponseData: [0x03, 0x03, 0x0D, 0x18]))
        try peripheral.command(LESetAdvertisingEnable(advertisingEnable: true))
        peripheral.say("advertising as \"EchoServer\" every 100 ms")

        // The central scans actively for a second.
        try central.command(LESetScanParameters(leScanType: .active, leScanInterval: 0x0010, leScanWindow: 0x0010,
                                                ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered))
        try central.command(LESetScanEnable(leScanEnable: true, filterDuplicates: true))
        central.say("scanning (active, duplicates filtered) for 1 s")
        loop.run(for: .seconds(1))
        try central.command(LESetScanEnable(leScanEnable: false, filterDuplicates: false))
        for report in central.takeEvents(advertisingReports) {
            central.say("  found \(report.address) \(report.eventType == .scanRsp ? "scan response" : "advertisement"), "
                        + "RSSI \(report.rssi) dBm, data \(report.data.hexString)\(localName(report.data).map { " (name \"\($0)\")" } ?? "")")
        }

        // Connect.
        try central.command(LECreateConnection(
            leScanInterval: 0x0010, leScanWindow: 0x0010, initiatorFilterPolicy: .peerAddress,
            peerAddressType: .publicDevice, peerAddress: peripheralAddress, ownAddressType: .publicDevice,
            connectionIntervalMin: 0x0018, connectionIntervalMax: 0x0018, maxLatency: 0, supervisionTimeout: 0x0048,
            minCELength: 0, maxCELength: 0))
        let centralHandle = try central.wait("connection", { e -> ConnectionHandle? in connectionHandle(e) })
        let peripheralHandle = try peripheral.wait("connection", { e -> ConnectionHandle? in connectionHandle(e) })
        central.say("connected to \(peripheralAddress) as central, handle 0x\(String(centralHandle, radix: 16)), interval 30 ms")
        peripheral.say("connected as peripheral, handle 0x\(String(peripheralHandle, radix: 16)); advertising stopped")

        // Longer link-layer packets.
        try central.command(LESetDataLength(connectionHandle: centralHandle, txOctets: 251, txTime: 2120))
        let change = try central.wait("data length change") { e -> LEDataLengthChange? in
            if case .le(.dataLengthChange(let c)) = e { c } else { nil }
        }
        central.say("data length now \(change.maxTxOctets) bytes out, \(change.maxRxOctets) in")

        // ATT Exchange MTU over L2CAP's fixed ATT channel, answered by the peripheral.
        let request: [UInt8] = [0x03, 0x00, 0x04, 0x00, 0x02, 0x05, 0x02]  // L2CAP len 3, CID 4, ATT MTU 517
        _ = central.driver.sendACL(handle: centralHandle, pdu: request)
        let received = try peripheral.waitACL()
        peripheral.say("received L2CAP \(received.hexString) (ATT Exchange MTU Request, MTU 517)")
        _ = peripheral.driver.sendACL(handle: peripheralHandle, pdu: [0x03, 0x00, 0x04, 0x00, 0x03, 0x05, 0x02])
        central.say("received L2CAP \(try central.waitACL().hexString) (ATT Exchange MTU Response, MTU 517)")

        // Encrypt the link with a key both sides hold.
        let ltk = (0..<16).map { UInt8($0 &* 17) }
        try central.command(LEEnableEncryption(connectionHandle: centralHandle, randomNumber: 0x0123_4567_89AB_CDEF,
                                               encryptedDiversifier: 0x1234, longTermKey: ltk))
        let keyRequest = try peripheral.wait("LTK request") { e -> LELongTermKeyRequest? in
            if case .le(.longTermKeyRequest(let r)) = e { r } else { nil }
        }
        peripheral.say("controller asks for the key of EDIV 0x\(String(keyRequest.encryptedDiversifier, radix: 16)); host supplies it")
        try peripheral.command(LELongTermKeyRequestReply(connectionHandle: peripheralHandle, longTermKey: ltk))
        for host in [central, peripheral] {
            let status = try host.wait("encryption change") { e -> HCIStatus? in
                if case .encryptionChangeV2(let c) = e { c.status } else if case .encryptionChange(let c) = e { c.status } else { nil }
            }
            host.say("link encrypted: \(status)")
        }

        // Hang up.
        try central.command(Disconnect(connectionHandle: centralHandle, reason: .remoteUserTerminatedConnection))
        for host in [central, peripheral] {
            let reason = try host.wait("disconnection") { e -> HCIStatus? in
                if case .disconnectionComplete(let d) = e { d.reason } else { nil }
            }
            host.say("disconnected: \(reason)")
        }
        emit("demo finished: \(radio.advertisingPDUsSent) advertising and \(radio.dataPDUsSent) data PDUs on the virtual radio")
    }
}

private func advertisingReports(_ event: HCIEvent) -> [LEAdvertisingReport.Report]? {
    if case .le(.advertisingReport(let r)) = event { r.reports } else { nil }
}

private func connectionHandle(_ event: HCIEvent) -> ConnectionHandle? {
    guard case .le(let le) = event, let complete = le.connectionComplete, complete.status.isSuccess else { return nil }
    return complete.connectionHandle
}

/// The Complete/Shortened Local Name AD structure, if any.
private func localName(_ data: [UInt8]) -> String? {
    var i = 0
    while i < data.count {
        let length = Int(data[i])
        guard length > 0, i + 1 + length <= data.count else { return nil }
        if data[i + 1] == 0x09 || data[i + 1] == 0x08 {
            return String(decoding: data[(i + 2)..<(i + 1 + length)], as: UTF8.self)
        }
        i += 1 + length
    }
    return nil
}

/// One side of the demo: an HCI driver with a little synchronous helper on a manual loop.
final class DemoHost: HCIDriverDelegate, @unchecked Sendable {
    let name: String
    let loop: EventLoop
    let driver: HCIDriver
    var events: [HCIEvent] = []
    var acl: [[UInt8]] = []

    init(name: String, loop: EventLoop, transport: HCITransport) {
        self.name = name
        self.loop = loop
        driver = HCIDriver(transport: transport, loop: loop)
        driver.delegate = self
    }

    func say(_ line: String) { emit("[\(name)] \(line)") }

    func start() throws -> ControllerInfo {
        let box = Box<Result<ControllerInfo, HCIError>>()
        loop.execute { self.driver.start { box.value = $0 } }
        loop.run(until: { box.value != nil }, timeout: .seconds(30))
        guard let result = box.value else { throw ToolError("\(name): the controller did not start") }
        return try result.get()
    }

    @discardableResult
    func command<C: HCICommand>(_ command: C) throws -> C.ReturnParameters {
        let box = Box<Result<C.ReturnParameters, HCIError>>()
        loop.execute { self.driver.send(command) { box.value = $0 } }
        loop.run(until: { box.value != nil }, timeout: .seconds(30))
        guard let result = box.value else { throw ToolError("\(name): \(C.name) got no answer") }
        return try result.get()
    }

    func wait<T>(_ what: String, _ match: @escaping (HCIEvent) -> T?) throws -> T {
        var found: T?
        loop.run(until: {
            if let index = self.events.firstIndex(where: { match($0) != nil }) {
                found = match(self.events.remove(at: index))
            }
            return found != nil
        }, timeout: .seconds(30))
        guard let found else { throw ToolError("\(name): no \(what)") }
        return found
    }

    func waitACL() throws -> [UInt8] {
        loop.run(until: { !self.acl.isEmpty }, timeout: .seconds(30))
        guard !acl.isEmpty else { throw ToolError("\(name): no data arrived") }
        return acl.removeFirst()
    }

    func takeEvents<T>(_ match: (HCIEvent) -> [T]?) -> [T] {
        var taken: [T] = []
        events.removeAll { e in
            guard let items = match(e) else { return false }
            taken += items
            return true
        }
        return taken
    }

    func didReceiveEvent(_ event: HCIEvent) { events.append(event) }
    func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8]) { acl.append(pdu) }
}

/// Holds a value a loop callback sets for the thread driving a manual loop (the same thread).
final class Box<T>: @unchecked Sendable {
    var value: T?
}
