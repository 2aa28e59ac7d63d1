import ATT
import AssignedNumbers
import Foundation
import GATT
import HCI
import HCIDriver
import HCITransport
import HostStack
import Scheduling
import TestSupport
import Testing
import VirtualController

/// A GATT peripheral of ours (LEHost + GATTServer) that serves every connection.
final class ServingPeripheral: LEHostDelegate, @unchecked Sendable {
    let server: GATTServer
    let loop: EventLoop
    private var bearers: [ATTBearer] = []
    init(server: GATTServer, loop: EventLoop) {
        self.server = server
        self.loop = loop
    }
    func host(_ host: LEHost, didConnect connection: LEConnection) {
        let bearer = ATTBearer(channel: connection.l2cap.att, loop: loop)
        server.attach(bearer)
        bearers.append(bearer)
    }
}

/// Issue 5, scenario 4: Bumble's host drives OUR virtual controller (served as H4 over TCP) and,
/// through our radio, talks GATT to our stack on another controller of the same radio: our
/// controller's link layer against an independent host.
@Suite("Interop: Bumble's host on our virtual controller", .serialized)
struct VirtualControllerInteropTests {
    @Test func bumblesCentralUsesOurControllerToReachOurPeripheral() throws {
        let radio = VirtualRadio(loop: EventLoop(name: "radio", pacing: .realTime), seed: 11)
        defer { radio.loop.shutdown() }
        let served = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:B1:01")!)
        let tcp = try H4TCPServer(host: "127.0.0.1", port: 0) { transport in served.attachHost(transport) }
        defer { tcp.close() }

        let server = GATTServer(deviceName: "SwiftGATT")
        let long = (0..<512).map { UInt8(truncatingIfNeeded: $0 * 5) }
        let custom = BluetoothUUID("6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
        let heartRate = try server.addService(GATTService(uuid: BluetoothUUID(uuid16: 0x180D), characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A37), properties: .notify, permissions: [], value: .stored([0, 60])),
            GATTCharacteristic(uuid: BluetoothUUID(uuid16: 0x2A38), properties: .read, permissions: .readable, value: .stored([1])),
        ]))
        try server.addService(GATTService(uuid: custom, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID("6E400002-B5A3-F393-E0A9-E50E24DCCA9E")!, properties: .read,
                               permissions: .readable, value: .stored(long)),
            GATTCharacteristic(uuid: BluetoothUUID("6E400003-B5A3-F393-E0A9-E50E24DCCA9E")!, properties: [.read, .write],
                               permissions: [.readable, .writeable], value: .stored([])),
        ]))
        let capture = temporaryPath("virtual-controller-bumble.btsnoop")
        let writer = try BtsnoopWriter(path: capture)
        let peripheralTransport = VirtualController(radio: radio, address: BluetoothAddress("C0:00:00:00:B1:02")!,
                                                    position: RadioPosition(x: 1)).makeHostTransport()
        let peripheral = LEHost(transport: SnoopingTransport(wrapping: peripheralTransport, writer: writer), loop: radio.loop)
        let serving = ServingPeripheral(server: server, loop: radio.loop)
        let advertising = Shared<Result<Void, HCIError>?>(nil)
        radio.loop.execute {
            peripheral.delegate = serving
            peripheral.start { _ in
                peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06])) { r in advertising.update { $0 = r } }
            }
        }
        #expect(waitUntil(timeout: .seconds(10)) { advertising.value != nil })
        try #require(advertising.value).get()

        let central = try PeerProcess(script: "bumble_central.py", arguments: ["tcp-client:127.0.0.1:\(tcp.port)", "C0:00:00:00:B1:02"])
        var failed = true
        defer { central.stop(failed: failed) }
        #expect(central.waitFor("READY", timeout: .seconds(30)))
        #expect(central.text.contains("MTU 517"))
        #expect(central.text.contains("SERVICE 180D") && central.text.contains("SERVICE 6E400001-B5A3-F393-E0A9-E50E24DCCA9E"))
        #expect(central.text.contains("CHARACTERISTIC 2A37") && central.text.contains("DESCRIPTOR 2902"))
        #expect(central.command("read 2A38", expect: "READ 2A38 01"))
        // 512 bytes: Read, then Read Blob, over our controller's link layer.
        #expect(central.command("read 6E400002-B5A3-F393-E0A9-E50E24DCCA9E",
                                expect: "READ 6E400002-B5A3-F393-E0A9-E50E24DCCA9E \(long.map { String(format: "%02x", $0) }.joined())"))
        #expect(central.command("write 6E400003-B5A3-F393-E0A9-E50E24DCCA9E 0a0b0c", expect: "WROTE"))
        #expect(central.command("read 6E400003-B5A3-F393-E0A9-E50E24DCCA9E", expect: "READ 6E400003-B5A3-F393-E0A9-E50E24DCCA9E 0a0b0c"))
        #expect(central.command("subscribe 2A37", expect: "SUBSCRIBED 2A37"))
        let measurement = heartRate.characteristics[0].value
        radio.loop.execute { server.updateValue([0, 61], forCharacteristic: measurement) }
        #expect(central.waitFor("VALUE 2A37 003d"))
        #expect(central.command("disconnect", expect: "DISCONNECTED"))
        writer.close()
        // Our peripheral's side of the session, as it crossed HCI, decodes cleanly.
        let result = try Tshark.check(capture: capture)
        #expect(result.frameCount > 20)
        #expect(result.malformed.isEmpty, "\(result.malformed)")
        failed = !result.malformed.isEmpty
        if failed { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) }
    }
}
