import Foundation
import HCI
import HCIDriver
import HCITesting
import HCITransport
import Scheduling
import TestTools
import Testing
@testable import VirtualController

/// A host driver with a recording delegate, on a manually paced loop.
final class DriverHost: HCIDriverDelegate, @unchecked Sendable {
    let driver: HCIDriver
    let loop: EventLoop
    var events: [HCIEvent] = []
    var pdus: [[UInt8]] = []
    var canSendMore = 0

    init(transport: HCITransport, loop: EventLoop) {
        self.loop = loop
        driver = HCIDriver(transport: transport, loop: loop)
        driver.delegate = self
    }

    func didReceiveEvent(_ event: HCIEvent) { events.append(event) }
    func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8]) { pdus.append(pdu) }
    func driverCanSendMore(handle: ConnectionHandle) { canSendMore += 1 }

    func start() throws -> ControllerInfo {
        let result = Shared<Result<ControllerInfo, HCIError>?>(nil)
        loop.execute { self.driver.start { r in result.update { $0 = r } } }
        loop.run(until: { result.value != nil }, timeout: .seconds(30))
        return try #require(result.value).get()
    }

    @discardableResult
    func command<C: HCICommand>(_ command: C) throws -> C.ReturnParameters {
        let result = Shared<Result<C.ReturnParameters, HCIError>?>(nil)
        loop.execute { self.driver.send(command) { r in result.update { $0 = r } } }
        loop.run(until: { result.value != nil }, timeout: .seconds(30))
        return try #require(result.value).get()
    }

    func connectionHandle() -> ConnectionHandle? {
        for case .le(let le) in events {
            if let c = le.connectionComplete, c.status.isSuccess { return c.connectionHandle }
        }
        return nil
    }
}

@Suite("Host driver on the virtual controller")
struct DriverIntegrationTests {
    static let peripheralAddress = BluetoothAddress("C0:11:22:33:44:01")!

    /// Two driver hosts on one radio; the central's HCI traffic optionally captured.
    func makeHosts(snoop: BtsnoopWriter? = nil) -> (central: DriverHost, peripheral: DriverHost, radio: VirtualRadio) {
        let radio = VirtualRadio(loop: EventLoop(name: "radio", pacing: .manual), seed: 3)
        var centralTransport = VirtualController(radio: radio, address: BluetoothAddress("C0:11:22:33:44:02")!).makeHostTransport()
        if let snoop { centralTransport = SnoopingTransport(wrapping: centralTransport, writer: snoop) }
        let central = DriverHost(transport: centralTransport, loop: radio.loop)
        let peripheral = DriverHost(transport: VirtualController(radio: radio, address: Self.peripheralAddress).makeHostTransport(),
                                    loop: radio.loop)
        return (central, peripheral, radio)
    }

    /// Scan, connect, and move `count` L2CAP PDUs of `size` bytes each way.
    func scanConnectAndExchange(_ central: DriverHost, _ peripheral: DriverHost, count: Int, size: Int) throws {
        let loop = central.loop
        try peripheral.command(LESetAdvertisingParameters(
            advertisingIntervalMin: 0x00A0, advertisingIntervalMax: 0x00A0, advertisingType: .advInd,
            ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
            advertisingChannelMap: 0x07, advertisingFilterPolicy: .acceptAll))
        try peripheral.command(LESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06, 0x05, 0x09, 0x54, 0x65, 0x73, 0x74]))
        try peripheral.command(LESetAdvertisingEnable(advertisingEnable: true))
        try central.command(LESetScanParameters(leScanType: .active, leScanInterval: 0x10, leScanWindow: 0x10,
                                                ownAddressType: .publicDevice, scanningFilterPolicy: .basicUnfiltered))
        try central.command(LESetScanEnable(leScanEnable: true, filterDuplicates: true))
        loop.run(for: .milliseconds(500))
        try central.command(LESetScanEnable(leScanEnable: false, filterDuplicates: false))
        let reports = central.events.compactMap { if case .le(.advertisingReport(let r)) = $0 { r } else { nil } }.flatMap(\.reports)
        #expect(reports.map(\.eventType) == [.advInd, .scanRsp])

        try central.command(LECreateConnection(
            leScanInterval: 0x10, leScanWindow: 0x10, initiatorFilterPolicy: .peerAddress, peerAddressType: .publicDevice,
            peerAddress: Self.peripheralAddress, ownAddressType: .publicDevice, connectionIntervalMin: 0x18,
            connectionIntervalMax: 0x18, maxLatency: 0, supervisionTimeout: 0x48, minCELength: 0, maxCELength: 0))
        loop.run(until: { central.connectionHandle() != nil && peripheral.connectionHandle() != nil }, timeout: .seconds(1))
        let ch = try #require(central.connectionHandle())
        let ph = try #require(peripheral.connectionHandle())

        // Whole L2CAP PDUs; the driver fragments to 251-byte ACL packets, the controller to
        // 27-byte link-layer PDUs, and the other host reassembles.
        let pdu: @Sendable (Int) -> [UInt8] = { i in
            let payload = (0..<(size - 4)).map { UInt8(truncatingIfNeeded: $0 &+ i) }
            return [UInt8(truncatingIfNeeded: payload.count), UInt8(payload.count >> 8), 0x04, 0x00] + payload
        }
        for i in 0..<count {
            loop.execute {
                #expect(central.driver.sendACL(handle: ch, pdu: pdu(i)))
                #expect(peripheral.driver.sendACL(handle: ph, pdu: pdu(i + 1000)))
            }
        }
        loop.run(until: { peripheral.pdus.count == count && central.pdus.count == count }, timeout: .seconds(5))
        #expect(peripheral.pdus == (0..<count).map(pdu))
        #expect(central.pdus == (0..<count).map { pdu($0 + 1000) })
        loop.run(for: .milliseconds(10))
        // Every controller buffer came back through Number Of Completed Packets.
        #expect(central.driver.aclCredits == 12)
        #expect(peripheral.driver.aclCredits == 12)

        try central.command(Disconnect(connectionHandle: ch, reason: .remoteUserTerminatedConnection))
        loop.run(until: { peripheral.events.contains { if case .disconnectionComplete = $0 { true } else { false } } }, timeout: .seconds(1))
    }

    @Test func driverStartsOnTheVirtualController() throws {
        let (central, _, _) = makeHosts()
        let info = try central.start()
        #expect(info.address == BluetoothAddress("C0:11:22:33:44:02"))
        #expect(info.aclDataPacketLength == 251 && info.totalACLDataPackets == 12)
        #expect(info.hciVersion == 0x0D)
        #expect(info.leFeatures.contains(.leEncryption))
        #expect(info.maxDataLength?.supportedMaxTXOctets == 251)
        // Extended advertising and scanning are there for the upper layers to use.
        #expect(info.supportsExtendedAdvertising && info.supportsExtendedScanning)
    }

    @Test func scanConnectAndExchangeLargePDUs() throws {
        let (central, peripheral, _) = makeHosts()
        _ = try central.start()
        _ = try peripheral.start()
        // 40 PDUs of 600 bytes each way: 3 ACL fragments each, more than the 12 buffers.
        try scanConnectAndExchange(central, peripheral, count: 40, size: 600)
    }

    @Test func captureOfScanConnectAndACLDecodesInTshark() throws {
        let path = temporaryPath("scan-connect-acl.btsnoop")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try BtsnoopWriter(path: path)
        let (central, peripheral, _) = makeHosts(snoop: writer)
        _ = try central.start()
        _ = try peripheral.start()
        // ATT-sized PDUs so tshark decodes them as ATT on the fixed channel.
        try scanConnectAndExchange(central, peripheral, count: 3, size: 30)
        writer.close()
        let records = try BtsnoopReader(path: path).records
        #expect(records.count > 30)
        let result = try Tshark.check(capture: path)
        #expect(result.frameCount == records.count)
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        #expect(result.expertErrors.isEmpty, "\(result.expertErrors)")
    }

    @Test func virtualControllerServedOverH4TCP() throws {
        // The radio runs on its own thread; the host talks to its controller over loopback TCP.
        let radio = VirtualRadio(loop: EventLoop(name: "radio", pacing: .realTime), seed: 5)
        defer { radio.loop.shutdown() }
        let served = VirtualController(radio: radio, address: BluetoothAddress("C0:AA:00:00:00:01")!)
        let server = try H4TCPServer(host: "127.0.0.1", port: 0) { transport in served.attachHost(transport) }
        defer { server.close() }
        // A second device on the same radio advertises.
        let advertiser = VirtualController(radio: radio, address: BluetoothAddress("C0:AA:00:00:00:02")!)
        let advertiserLink = advertiser.makeHostTransport()
        let sink = RecordingSink()
        try advertiserLink.open(on: radio.loop, sink: sink)
        for command in [
            LESetAdvertisingParameters(advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20, advertisingType: .advNonconnInd,
                                       ownAddressType: .publicDevice, peerAddressType: .publicDevice, peerAddress: .zero,
                                       advertisingChannelMap: 7, advertisingFilterPolicy: .acceptAll).packet,
            LESetAdvertisingEnable(advertisingEnable: true).packet,
        ] { advertiserLink.send(.command(command)) }

        let hostLoop = EventLoop(name: "host", pacing: .realTime)
        defer { hostLoop.shutdown() }
        let spec = try TransportSpec(parsing: "tcp:127.0.0.1:\(server.port)")
        let driver = HCIDriver(transport: try spec.makeExternalTransport(), loop: hostLoop)
        let started = Shared<Result<ControllerInfo, HCIError>?>(nil)
        hostLoop.execute { driver.start { r in started.update { $0 = r } } }
        #expect(waitUntil(timeout: .seconds(5)) { started.value != nil })
        let info = try #require(started.value).get()
        #expect(info.address == BluetoothAddress("C0:AA:00:00:00:01"))

        final class Reports: HCIDriverDelegate, @unchecked Sendable {
            let count = Shared(0)
            func didReceiveEvent(_ event: HCIEvent) {
                if case .le(.advertisingReport(let r)) = event { count.update { $0 += r.reports.count } }
            }
            func didReceiveACL(handle: ConnectionHandle, pdu: [UInt8]) {}
        }
        let reports = Reports()
        hostLoop.execute {
            driver.delegate = reports
            driver.send(LESetScanEnable(leScanEnable: true, filterDuplicates: false)) { _ in }
        }
        #expect(waitUntil(timeout: .seconds(5)) { reports.count.value >= 3 })
        hostLoop.execute { driver.stop() }
    }
}
