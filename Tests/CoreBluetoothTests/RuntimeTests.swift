import Dispatch
import Foundation
import TestSupport
import Testing
@testable import CoreBluetooth
import HostStack

private final class StateDelegate: NSObject, CBCentralManagerDelegate, CBPeripheralManagerDelegate, @unchecked Sendable {
    let log = EventLog()
    func centralManagerDidUpdateState(_ central: CBCentralManager) { log.append("central \(central.state.rawValue)") }
    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) { log.append("peripheral \(peripheral.state.rawValue)") }
}

@Suite struct RuntimeTests {
    @Test func managersPowerOnOnAVirtualRadioWithoutTimePassing() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let delegate = StateDelegate()
        let (central, peripheral) = CBVirtualRadio.withCurrent(radio) {
            (CBCentralManager(delegate: delegate, queue: nil), CBPeripheralManager(delegate: delegate, queue: DispatchQueue(label: "p")))
        }
        // The state arrives after init, through the delegate (already, or soon: the device
        // starts on its own loop meanwhile).
        #expect([.unknown, .poweredOn].contains(central.state))
        let on = radio.run(until: { delegate.log.contains("central 5") && delegate.log.contains("peripheral 5") }, timeout: .seconds(1))
        #expect(on)
        #expect(central.state == .poweredOn && peripheral.state == .poweredOn)
        #expect(central.linuxDeviceAddress != peripheral.linuxDeviceAddress)
        #expect(central.linuxDeviceAddress?.hasPrefix("CB:") == true)
    }

    @Test func callsBeforePoweredOnAreReportedAsMisuseAndIgnored() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let delegate = StateDelegate()
        let central = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: delegate, queue: nil) }
        central.scanForPeripherals(withServices: nil)
        #expect(!central.isScanning)
    }

    @Test func anUnreachableTransportMakesTheManagerUnsupported() throws {
        let delegate = StateDelegate()
        let central = CBCentralManager(delegate: delegate, queue: nil,
                                       options: [CBManagerOptionLinuxTransportKey: "tcp:127.0.0.1:1"])
        let unsupported = CBVirtualRadio.waitForCallbacks(until: { delegate.log.contains("central 2") }, timeout: .seconds(10))
        #expect(unsupported)
        #expect(central.state == .unsupported)
    }

    @Test func runForLetsVirtualTimePass() {
        let radio = CBVirtualRadio(clock: .virtual)
        let start = radio.now
        radio.run(for: .seconds(30))
        #expect(radio.now - start >= .seconds(30))
        #expect(radio.now - start < .seconds(31))
    }
}

@Suite struct RawDeviceTests {
    @Test func twoRawDevicesConnectOnAVirtualRadio() throws {
        let radio = CBVirtualRadio(clock: .virtual)
        let a = try RawDevice(radio: radio)
        let b = try RawDevice(radio: radio, position: .init(x: 1))
        let bAddress = b.address
        try b.await { device, done in device.host.startAdvertising(AdvertisingParameters(data: [2, 1, 6]), completion: done) }
        try a.await { device, done in device.host.connect(to: bAddress, completion: done) }
        let connected = radio.run(until: { a.snapshot { $0.client != nil } && b.snapshot { $0.connection != nil } }, timeout: .seconds(5))
        #expect(connected)
        let mtu = try a.await { device, done in device.client!.exchangeMTU(completion: done) }
        #expect(mtu > 23)
    }
}

/// `linuxSchedule` delays from a spec or a capture (found while writing the spec and capture fuzz
/// targets: `cbtool spec-from-capture` of a capture whose clock jumps writes notification times
/// of ~10^13 s, and `Int64(delay * 1e9)` trapped when `cbtool simulate` scheduled them).
@Suite struct ScheduleDelayTests {
    @Test func absurdDelaysAreCappedAndNeverTrap() {
        #expect(CBManager.loopNanoseconds(after: 1.5) == 1_500_000_000)
        #expect(CBManager.loopNanoseconds(after: 0) == 0)
        #expect(CBManager.loopNanoseconds(after: -3) == 0)
        #expect(CBManager.loopNanoseconds(after: .nan) == 0)
        for absurd in [9.2e12, 1e300, .infinity] {
            #expect(CBManager.loopNanoseconds(after: absurd) == 1_000_000_000_000_000_000)
        }
    }
}
