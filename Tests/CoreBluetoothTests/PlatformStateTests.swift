import Foundation
import Glibc
import HCI
import HCITransport
import Scheduling
import TestSupport
import Testing
import VirtualController
@testable import CoreBluetooth

/// The state, authorization and reason a failed controller open gives, as a pure function.
@Suite struct DeviceAvailabilityTests {
    private func classify(_ transport: String, _ code: Int32?, message: String = "the transport's message") throws
        -> DeviceAvailability
    {
        DeviceAvailability.classify(transport: try TransportSpec(parsing: transport), errno: code, message: message,
                                    executable: "/usr/local/bin/app")
    }

    @Test func noCapabilityIsUnauthorizedAndSaysWhatToGrant() throws {
        for code in [EPERM, EACCES] {
            let result = try classify("hci:1", code)
            #expect(result.state == .unauthorized)
            #expect(result.permission == .denied)
            #expect(!result.retries)
            #expect(result.reason.hasPrefix("hci1: this process may not use the HCI user channel"))
            #expect(result.reason.contains("CAP_NET_ADMIN"))
            #expect(result.reason.contains("`sudo setcap cap_net_admin+ep /usr/local/bin/app`"))
            #expect(result.reason.contains("run as root"))
            #expect(result.reason.contains("`sudo btmgmt --index 1 power off` (or `sudo hciconfig hci1 down`)"))
        }
    }

    @Test func noSuchAdapterOrNoBluetoothIsUnsupported() throws {
        let missing = try classify("hci:3", ENODEV)
        #expect(missing.state == .unsupported && !missing.retries)
        // The kernel checked the capability before it looked for the adapter.
        #expect(missing.permission == .allowedAlways)
        #expect(missing.reason.hasPrefix("hci3: no such Bluetooth adapter (ENODEV)"))
        let noKernelSupport = try classify("hci0", EAFNOSUPPORT)
        #expect(noKernelSupport.state == .unsupported && noKernelSupport.permission == nil)
        #expect(noKernelSupport.reason.contains("no Bluetooth support (EAFNOSUPPORT)"))
        let other = try classify("hci:0", EINVAL, message: "hci0: bind: Invalid argument (EINVAL)")
        #expect(other == DeviceAvailability(state: .unsupported, permission: nil, reason: "hci0: bind: Invalid argument (EINVAL)", retries: false))
    }

    @Test func aHeldAdapterIsResettingAndRetried() throws {
        let up = try classify("hci:0", EBUSY)
        #expect(up.state == .resetting && up.retries && up.permission == .allowedAlways)
        #expect(up.reason.contains("`sudo btmgmt --index 0 power off`"))
        let taken = try classify("hci:0", EUSERS)
        #expect(taken.state == .resetting && taken.retries)
        #expect(taken.reason.contains("another process has the adapter's user channel"))
        let gaveUp = up.givingUp(after: .seconds(30))
        #expect(gaveUp.state == .unsupported && !gaveUp.retries)
        #expect(gaveUp.reason.hasSuffix("power off` (or `sudo hciconfig hci0 down`). Gave up after 30 s of retries; a new manager tries again."))
    }

    @Test func aBlockedAdapterIsPoweredOffAndRetried() throws {
        let blocked = try classify("hci:0", ERFKILL)
        #expect(blocked.state == .poweredOff && blocked.retries)
        #expect(blocked.reason.contains("`rfkill unblock bluetooth`"))
    }

    @Test func otherTransportsAreUnsupportedUnlessAPermissionIsMissing() throws {
        let refused = try classify("tcp:127.0.0.1:9", ECONNREFUSED, message: "connect to 127.0.0.1:9: Connection refused")
        #expect(refused == DeviceAvailability(state: .unsupported, permission: nil,
                                              reason: "connect to 127.0.0.1:9: Connection refused", retries: false))
        #expect(try classify("unix:/tmp/none", ENOENT).state == .unsupported)
        #expect(try classify("serial:/dev/ttyUSB9", ENOENT).state == .unsupported)
        #expect(try classify("tcp:127.0.0.1:9", nil).state == .unsupported)
        let serial = try classify("serial:/dev/ttyUSB0", EACCES)
        #expect(serial.state == .unauthorized && serial.permission == .denied)
        #expect(serial.reason.contains("dialout"))
        #expect(try classify("unix:/run/hci.sock", EACCES).state == .unauthorized)
        #expect(DeviceAvailability.classify(transport: nil, errno: EPERM, message: "m", executable: "x").state == .unsupported)
    }

    @Test func theCapabilityIsReadFromTheStatusFile() {
        #expect(ProcessAuthorization.hasNetAdmin(status: "Name:\tapp\nCapEff:\t000001ffffffffff\n") == true)
        #expect(ProcessAuthorization.hasNetAdmin(status: "CapInh:\t0000000000001000\nCapEff:\t0000000000000000\n") == false)
        #expect(ProcessAuthorization.hasNetAdmin(status: "CapEff:\t0000000000001000") == true)
        #expect(ProcessAuthorization.hasNetAdmin(status: "CapEff:\t0000000000000800") == false)
        #expect(ProcessAuthorization.hasNetAdmin(status: "Name:\tapp\n") == nil)
    }

    @Test func rawValuesAreApples() {
        #expect([CBManagerState.unknown, .resetting, .unsupported, .unauthorized, .poweredOff, .poweredOn].map(\.rawValue)
            == [0, 1, 2, 3, 4, 5])
        #expect([CBManagerAuthorization.notDetermined, .restricted, .denied, .allowedAlways].map(\.rawValue) == [0, 1, 2, 3])
    }
}

/// Managers on an "adapter" whose opening fails as the kernel's would, then reaches a virtual
/// controller: the state callbacks, retries on the radio's virtual time, the authorization.
/// Serialized: the class property `CBManager.authorization` is the process's.
@Suite(.serialized) struct PlatformStateTests {
    private final class StateDelegate: NSObject, CBCentralManagerDelegate, CBPeripheralManagerDelegate, @unchecked Sendable {
        let log = EventLog()
        func centralManagerDidUpdateState(_ central: CBCentralManager) { log.append("central \(central.state.rawValue)") }
        func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
            log.append("peripheral \(peripheral.state.rawValue)")
        }
    }

    /// Makes the adapter's transport: each open fails with the next scripted errno, as the
    /// user channel's bind would; once they are used up it reaches a virtual controller.
    private final class AdapterDouble: @unchecked Sendable {
        let radio = CBVirtualRadio(clock: .virtual)
        let failures: Locked<[Int32]>
        let attempts = Locked(0)
        let bonds = temporaryPath("bonds")

        init(failing failures: [Int32]) { self.failures = Locked(failures) }

        func options(index: Int) -> [String: Any] {
            let override = ExternalDeviceOverride(radio: radio) { [self] spec in Transport(adapter: self, spec: spec) }
            return [CBManagerOptionLinuxTransportKey: "hci:\(index)", LocalDevice.overrideOptionKey: override,
                    CBManagerOptionLinuxBondDirectoryKey: bonds]
        }

        final class Transport: HCITransport, @unchecked Sendable {
            let adapter: AdapterDouble
            let spec: TransportSpec
            var link: HCITransport?
            init(adapter: AdapterDouble, spec: TransportSpec) {
                self.adapter = adapter
                self.spec = spec
            }
            func open(on loop: EventLoop, sink: HCIPacketSink) throws {
                adapter.attempts.withLock { $0 += 1 }
                if let code = adapter.failures.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                    throw HCITransportError("\(spec): bind failed", errno: code)
                }
                let link = adapter.radio.makeController(position: RadioPosition()).makeHostTransport()
                self.link = link
                try link.open(on: loop, sink: sink)
            }
            func send(_ packet: HCIPacket) { link?.send(packet) }
            func close() { link?.close() }
        }

        deinit { try? FileManager.default.removeItem(atPath: bonds) }
    }

    init() { ProcessAuthorization.learned.withLock { $0 = nil } }

    @Test func aHeldAdapterIsResettingThenPoweredOnWhenFree() throws {
        let adapter = AdapterDouble(failing: [EBUSY, EBUSY, EUSERS])
        let delegate = StateDelegate()
        let start = adapter.radio.now
        let central = CBCentralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_001))
        #expect(adapter.radio.run(until: { delegate.log.contains("central 5") }, timeout: .seconds(20)))
        // One `.resetting` however many retries, then `.poweredOn` at the fourth attempt, 2 s apart.
        #expect(delegate.log.all == ["central 1", "central 5"])
        #expect(adapter.attempts.current == 4)
        #expect(adapter.radio.now - start >= .seconds(6))
        #expect(central.state == .poweredOn)
        #expect(central.linuxUnavailableReason == nil)
        #expect(CBManager.authorization == .allowedAlways)
    }

    @Test func anAdapterHeldForLongIsUnsupportedWithTheReason() throws {
        let adapter = AdapterDouble(failing: Array(repeating: EBUSY, count: 100))
        let delegate = StateDelegate()
        let start = adapter.radio.now
        let central = CBCentralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_002))
        #expect(adapter.radio.run(until: { delegate.log.contains("central 2") }, timeout: .seconds(60)))
        #expect(delegate.log.all == ["central 1", "central 2"])
        #expect(adapter.radio.now - start >= .seconds(30))
        // Every 2 s for 30 s, then no more.
        #expect((15...17).contains(adapter.attempts.current))
        let reason = try #require(central.linuxUnavailableReason)
        #expect(reason.contains("hci60002: the system's Bluetooth stack has the adapter up (EBUSY)"))
        #expect(reason.hasSuffix("Gave up after 30 s of retries; a new manager tries again."))
        let attempts = adapter.attempts.current
        adapter.radio.run(for: .seconds(10))
        #expect(adapter.attempts.current == attempts)
    }

    @Test func noPermissionIsUnauthorizedAndDeniedUntilOneOpens() throws {
        // Each manager tries the adapter.
        let adapter = AdapterDouble(failing: [EPERM, EPERM])
        let delegate = StateDelegate()
        let central = CBCentralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_003))
        let peripheral = CBPeripheralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_003))
        #expect(adapter.radio.run(until: { delegate.log.contains("central 3") && delegate.log.contains("peripheral 3") },
                                  timeout: .seconds(10)))
        // Both managers share the adapter, and neither retries.
        adapter.radio.run(for: .seconds(10))
        #expect(delegate.log.all.sorted() == ["central 3", "peripheral 3"])
        #expect(central.managerAuthorization == .denied && peripheral.managerAuthorization == .denied)
        #expect(CBManager.authorization == .denied)
        let reason = try #require(central.linuxUnavailableReason)
        #expect(reason.contains("`sudo setcap cap_net_admin+ep "))
        #expect(reason.contains("`sudo btmgmt --index 60003 power off`"))
        #expect(peripheral.linuxUnavailableReason == reason)

        // Another adapter that opens: the process is allowed again.
        let other = AdapterDouble(failing: [])
        let otherDelegate = StateDelegate()
        let second = CBCentralManager(delegate: otherDelegate, queue: nil, options: other.options(index: 60_004))
        #expect(other.radio.run(until: { otherDelegate.log.contains("central 5") }, timeout: .seconds(10)))
        #expect(CBManager.authorization == .allowedAlways)
        #expect(second.managerAuthorization == .allowedAlways)
        #expect(central.managerAuthorization == .denied)
    }

    @Test func noSuchAdapterIsUnsupported() throws {
        let adapter = AdapterDouble(failing: [ENODEV])
        let delegate = StateDelegate()
        let central = CBCentralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_005))
        #expect(adapter.radio.run(until: { delegate.log.contains("central 2") }, timeout: .seconds(10)))
        adapter.radio.run(for: .seconds(5))
        #expect(adapter.attempts.current == 1)
        #expect(central.linuxUnavailableReason?.hasPrefix("hci60005: no such Bluetooth adapter (ENODEV)") == true)
    }

    @Test func aBlockedAdapterIsPoweredOffUntilUnblocked() throws {
        let adapter = AdapterDouble(failing: [ERFKILL, ERFKILL, ERFKILL])
        let delegate = StateDelegate()
        let central = CBCentralManager(delegate: delegate, queue: nil, options: adapter.options(index: 60_006))
        #expect(adapter.radio.run(until: { delegate.log.contains("central 5") }, timeout: .seconds(20)))
        #expect(delegate.log.all == ["central 4", "central 5"])
        #expect(central.state == .poweredOn)
    }

    /// A real HCI socket on an adapter index no machine has: no adapter (ENODEV), no Bluetooth
    /// in the kernel (EAFNOSUPPORT, as on CI), or no permission, depending on the machine;
    /// never a crash or a hang.
    @Test func aRealAdapterThatIsNotThere() throws {
        let delegate = StateDelegate()
        let central = CBCentralManager(delegate: delegate, queue: nil, options: [CBManagerOptionLinuxTransportKey: "hci:4242"])
        #expect(CBVirtualRadio.waitForCallbacks(until: { !delegate.log.all.isEmpty }, timeout: .seconds(10)))
        #expect([.unsupported, .unauthorized].contains(central.state))
        let reason = try #require(central.linuxUnavailableReason)
        #expect(reason.hasPrefix("hci4242: "))
        if central.state == .unauthorized {
            #expect(reason.contains("setcap cap_net_admin+ep"))
            #expect(CBManager.authorization == .denied)
        }
    }
}
