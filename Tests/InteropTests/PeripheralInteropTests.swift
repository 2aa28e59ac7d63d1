import CoreBluetooth
import Foundation
import TestSupport
import Testing

/// A peripheral manager's delegate for the interop test: answers dynamic reads with a long
/// value, takes every write, and writes down what happened.
final class InteropPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    let queue = DispatchQueue(label: "interop-peripheral")
    static let longValue = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 * 11) })
    private let lock = NSLock()
    private var batches: [[(offset: Int, value: Data)]] = []
    var writeBatches: [[(offset: Int, value: Data)]] { lock.withLock { batches } }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("state \(peripheral.state.rawValue)") }
    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        log.append("added \(service.uuid.uuidString)\(error == nil ? "" : " error")")
    }
    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        log.append("advertising\(error == nil ? "" : " error")")
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        log.append("read \(request.characteristic.uuid.uuidString) \(request.offset)")
        guard request.offset <= Self.longValue.count else { return peripheral.respond(to: request, withResult: .invalidOffset) }
        request.value = Self.longValue.subdata(in: request.offset..<Self.longValue.count)
        peripheral.respond(to: request, withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        lock.withLock { batches.append(requests.map { ($0.offset, $0.value ?? Data()) }) }
        log.append("write \(requests[0].characteristic.uuid.uuidString) \(requests.count)")
        peripheral.respond(to: requests[0], withResult: .success)
    }
    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        log.append("subscribed \(characteristic.uuid.uuidString)")
    }
}

/// Issue 5, scenario 2: a Bumble central (Bumble's host on a Bumble controller) against our
/// CBPeripheralManager on a linked Bumble controller, reached through `tcp:`. Real time.
@Suite("Interop: a Bumble central ↔ our peripheral manager", .serialized)
struct PeripheralInteropTests {
    static func uuid(_ n: Int) -> String { String(format: "6E41%04X-B5A3-F393-E0A9-E50E24DCCA9E", n) }
    static func cb(_ n: Int) -> CBUUID { CBUUID(string: uuid(n)) }

    func wait(_ condition: @escaping () -> Bool) -> Bool {
        CBVirtualRadio.waitForCallbacks(until: condition, timeout: .seconds(15))
    }

    @Test func bumbleUsesEveryServerFeature() throws {
        let ports = [try freeLoopbackPort(), try freeLoopbackPort()]
        let controllers = try PeerProcess(script: "bumble_controllers.py", arguments: ports.map(String.init))
        var failed = true
        defer { controllers.stop(failed: failed) }
        #expect(controllers.waitFor("READY"))

        let capture = temporaryPath("peripheral-bumble.btsnoop")
        defer { if failed { Issue.record("capture \(capture)") } else { try? FileManager.default.removeItem(atPath: capture) } }
        let delegate = InteropPeripheral()
        var manager: CBPeripheralManager? = CBPeripheralManager(delegate: delegate, queue: delegate.queue, options: [
            CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:\(ports[0])", CBManagerOptionLinuxSnoopPathKey: capture,
        ])
        #expect(wait { delegate.log.contains("state 5") })
        let service = CBMutableService(type: Self.cb(1), primary: true)
        let notify = CBMutableCharacteristic(type: Self.cb(5), properties: .notify, value: nil, permissions: [])
        let indicate = CBMutableCharacteristic(type: Self.cb(6), properties: .indicate, value: nil, permissions: [])
        service.characteristics = [
            CBMutableCharacteristic(type: Self.cb(2), properties: .read, value: Data("cached".utf8), permissions: .readable),
            CBMutableCharacteristic(type: Self.cb(3), properties: .read, value: nil, permissions: .readable),
            CBMutableCharacteristic(type: Self.cb(4), properties: [.write, .writeWithoutResponse], value: nil, permissions: .writeable),
            notify, indicate,
            CBMutableCharacteristic(type: Self.cb(7), properties: .read, value: nil, permissions: .readable),
            CBMutableCharacteristic(type: Self.cb(8), properties: .write, value: nil, permissions: .writeable),
        ]
        manager?.add(service)
        #expect(wait { delegate.log.contains("added \(Self.uuid(1))") })
        manager?.startAdvertising([CBAdvertisementDataLocalNameKey: "SwiftPeripheral", CBAdvertisementDataServiceUUIDsKey: [Self.cb(1)]])
        #expect(wait { delegate.log.contains("advertising") })
        let address = try #require(manager?.linuxDeviceAddress)

        // MTU 64, so that the 300-byte read and write take several PDUs.
        let bumble = try PeerProcess(script: "bumble_central.py", arguments: ["tcp-client:127.0.0.1:\(ports[1])", "\(address)/R", "64"])
        defer { bumble.stop(failed: failed) }
        #expect(bumble.waitFor("READY", timeout: .seconds(30)))
        #expect(bumble.text.contains("MTU 64"))
        #expect(bumble.text.contains("SERVICE \(Self.uuid(1))"))
        for n in 2...8 { #expect(bumble.text.contains("CHARACTERISTIC \(Self.uuid(n))"), "\(n)") }

        // Cached value: answered by the stack. Dynamic value: the delegate, at each offset.
        #expect(bumble.command("read \(Self.uuid(2))", expect: "READ \(Self.uuid(2)) \(Data("cached".utf8).hex)"))
        #expect(bumble.command("read \(Self.uuid(3))", expect: "READ \(Self.uuid(3)) \(InteropPeripheral.longValue.hex)"))
        #expect(!delegate.log.all.contains { $0.hasPrefix("read \(Self.uuid(2))") })
        #expect(delegate.log.count(prefix: "read \(Self.uuid(3))") > 1)

        // Writes: a request, a command, and a long (prepared) write that arrives as one batch.
        #expect(bumble.command("write \(Self.uuid(4)) 0102", expect: "WROTE"))
        #expect(bumble.command("write-command \(Self.uuid(4)) 0304", expect: "SENT"))
        let long = Data((0..<200).map { UInt8(truncatingIfNeeded: $0) })
        #expect(bumble.command("write \(Self.uuid(4)) \(long.hex)", expect: "WROTE"))
        #expect(wait { delegate.writeBatches.count == 3 })
        let batches = delegate.writeBatches
        #expect(batches.first?.first?.value == Data([1, 2]))
        #expect(batches.dropFirst().first?.first?.value == Data([3, 4]))
        let prepared = try #require(batches.last)
        #expect(prepared.count > 1)
        #expect(prepared.reduce(Data()) { $0 + $1.value } == long)

        // Notifications and indications.
        #expect(bumble.command("subscribe \(Self.uuid(5))", expect: "SUBSCRIBED"))
        #expect(bumble.command("subscribe \(Self.uuid(6))", expect: "SUBSCRIBED"))
        #expect(wait { delegate.log.contains("subscribed \(Self.uuid(6))") })
        #expect(manager?.updateValue(Data([0x55]), for: notify, onSubscribedCentrals: nil) == true)
        #expect(manager?.updateValue(Data([0x66]), for: indicate, onSubscribedCentrals: nil) == true)
        #expect(bumble.waitFor("VALUE \(Self.uuid(5)) 55"))
        #expect(bumble.waitFor("VALUE \(Self.uuid(6)) 66"))

        // Forbidden operations get the right ATT errors.
        #expect(bumble.command("write \(Self.uuid(7)) 00", expect: "ERROR write \(Self.uuid(7)) 03"))
        #expect(bumble.command("read \(Self.uuid(8))", expect: "ERROR read \(Self.uuid(8)) 02"))

        // Adding a service: Service Changed reaches the central.
        manager?.add(CBMutableService(type: Self.cb(0x20), primary: true))
        #expect(bumble.waitFor("SERVICE-CHANGED"))

        manager = nil
        let result = try Tshark.check(capture: capture)
        #expect(result.frameCount > 50)
        #expect(result.malformedSent.isEmpty && result.malformedReceived.isEmpty, "\(result.malformed)")
        failed = !(result.malformedSent.isEmpty && result.malformedReceived.isEmpty)
    }
}

extension Data {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
