import CoreBluetooth
import Foundation
import Synchronization
import HCI
import VirtualController

// The workloads of issue 7, through Apple's API only (plus CBVirtualRadio, which owns the
// clock): a CBPeripheralManager and a CBCentralManager on one virtual radio, each calling its
// delegate on a private serial queue, the way an app would.

let benchService = CBUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")
let benchCharacteristic = CBUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")

/// A number, atomic: written on a delegate queue, read by the driving thread's conditions.
final class Count: Sendable {
    private let storage = Atomic<Int>(0)
    var value: Int { storage.load(ordering: .acquiring) }
    func add(_ n: Int = 1) { storage.add(n, ordering: .releasing) }
}

/// Notifications and their bytes. Atomics, not a lock: the driving thread reads the count after
/// every callback, and a lock there and in the callback (~250 instructions a notification) was
/// the harness's cost counted as the stack's.
final class Received: Sendable {
    private let count = Count()
    private let bytes = Count()
    var value: Int { count.value }
    /// Complete for every notification `value` counts (added before it).
    var byteCount: Int { bytes.value }
    func add(bytes n: Int) {
        bytes.add(n)
        count.add()
    }
}

/// Wall-clock nanoseconds (monotonic), for round trips.
func wallNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// CPU seconds of this process, all threads (the loop's, the delegate queues', the driver's).
func cpuSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// The CPU and wall seconds `body` took.
func measureBoth(_ body: () -> Void) -> (cpu: Double, wall: Double) {
    let cpu0 = cpuSeconds(), wall0 = wallNanoseconds()
    body()
    return (cpuSeconds() - cpu0, Double(wallNanoseconds() - wall0) / 1e9)
}

/// Voluntary context switches of the whole process so far (a thread that blocked: each is
/// followed by a wake-up).
func voluntaryContextSwitches() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_nvcsw
}

/// Resident memory of this process, in KiB.
func residentKiB() -> Double {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
    let fields = text.split(separator: " ")
    guard fields.count > 1, let pages = Double(fields[1]) else { return 0 }
    return pages * Double(sysconf(Int32(_SC_PAGESIZE))) / 1024
}

// MARK: - The peripheral side

/// The benchmark's GATT server: one characteristic that notifies, takes writes without
/// response and answers reads from the delegate (20 bytes), so a read crosses both APIs.
final class BenchPeripheral: NSObject, CBPeripheralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.peripheral")
    private(set) var manager: CBPeripheralManager!
    let characteristic = CBMutableCharacteristic(type: benchCharacteristic,
                                                 properties: [.read, .notify, .writeWithoutResponse],
                                                 value: nil, permissions: [.readable, .writeable])
    let name: String
    let advertising = Count()
    let subscribers = Count()
    let writesReceived = Count()
    /// Set on `queue`.
    private(set) var subscriber: CBCentral?
    private let readAnswer = Data(repeating: 0x42, count: 20)

    // Notifications to send (queue-confined): `pump` sends until `target` or a full queue.
    private var value = Data()
    private var sent = 0
    private var target = 0

    /// Counts advertising managers across many peripherals, if given (a wait's condition reads
    /// it once instead of walking every peripheral after each callback).
    private let advertisingTotal: Count?

    init(radio: CBVirtualRadio, name: String = "bench", advertisingTotal: Count? = nil) {
        self.name = name
        self.advertisingTotal = advertisingTotal
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBPeripheralManager(delegate: self, queue: queue) }
    }

    func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = CBMutableService(type: benchService, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        precondition(error == nil, "add service: \(error!)")
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: name, CBAdvertisementDataServiceUUIDsKey: [benchService]])
    }

    func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        precondition(error == nil, "advertise: \(error!)")
        advertising.add()
        advertisingTotal?.add()
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, central: CBCentral, didSubscribeTo characteristic: CBCharacteristic) {
        subscriber = central
        subscribers.add()
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveRead request: CBATTRequest) {
        request.value = readAnswer
        peripheral.respond(to: request, withResult: .success)
    }

    func peripheralManager(_ peripheral: CBPeripheralManager, didReceiveWrite requests: [CBATTRequest]) {
        writesReceived.add(requests.count)
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: CBPeripheralManager) { pump() }

    /// Sends `count` notifications of `value` (endless when nil), honouring back-pressure.
    ///
    /// The first values go before this returns (`sync`), while the driving thread still holds
    /// a virtual clock: a block merely queued here is not a delegate callback, so the clock
    /// would not wait for it, and the radio's time could run out (the timed window pass, the
    /// 3,600 s timeout strike) before the queue's thread ran it — the stall that made
    /// `timed_fraction_of_ceiling` read 0.
    func startNotifying(_ value: Data, count: Int?) {
        queue.sync { [self] in
            self.value = value
            sent = 0
            target = count ?? .max
            pump()
        }
    }

    func stopNotifying() { queue.sync { target = 0 } }

    private func pump() {
        while sent < target {
            guard manager.updateValue(value, for: characteristic, onSubscribedCentrals: nil) else { return }
            sent += 1
        }
    }
}

// MARK: - The central side

/// The benchmark's client: finds the peripheral, connects, discovers the characteristic and
/// subscribes; then counts notifications, makes writes without response, or times reads.
final class BenchCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.central")
    private(set) var manager: CBCentralManager!
    private let targetName: String
    let ready = Count()
    let received = Received()
    let writesSent = Count()
    let readsDone = Count()
    /// Set on `queue`.
    private(set) var peripheral: CBPeripheral?
    private(set) var characteristic: CBCharacteristic?

    // Queue-confined.
    private var mode = Mode.notifications
    private var writeValue = Data()
    private var writesLeft = 0
    private var readsLeft = 0
    private var readStart: UInt64 = 0
    private(set) var roundTrips: [UInt64] = []

    enum Mode { case notifications, reads }

    init(radio: CBVirtualRadio, connectingTo name: String = "bench") {
        targetName = name
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: self, queue: queue) }
    }

    /// A central made with `options` (`CBManagerOptionLinuxTransportKey: "daemon:PATH"`: on
    /// `corebluetoothd`).
    init(options: [String: Any], connectingTo name: String = "bench") {
        targetName = name
        super.init()
        manager = CBCentralManager(delegate: self, queue: queue, options: options)
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        guard central.state == .poweredOn else { return }
        central.scanForPeripherals(withServices: [benchService], options: nil)
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard self.peripheral == nil, advertisementData[CBAdvertisementDataLocalNameKey] as? String == targetName else { return }
        central.stopScan()
        self.peripheral = peripheral
        peripheral.delegate = self
        central.connect(peripheral, options: nil)
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.discoverServices([benchService])
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first else { fatalError("no service: \(String(describing: error))") }
        peripheral.discoverCharacteristics([benchCharacteristic], for: service)
    }

    func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { fatalError("no characteristic") }
        self.characteristic = characteristic
        peripheral.setNotifyValue(true, for: characteristic)
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateNotificationStateFor characteristic: CBCharacteristic, error: Error?) {
        precondition(error == nil, "subscribe: \(error!)")
        ready.add()
    }

    func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        switch mode {
        case .notifications:
            // One lock for both counts (the driving thread reads them after every callback).
            received.add(bytes: characteristic.value?.count ?? 0)
        case .reads:
            roundTrips.append(wallNanoseconds() - readStart)
            precondition(characteristic.value?.count == 20)
            readsLeft -= 1
            readsDone.add()
            if readsLeft > 0 { readNext() }
        }
    }

    // Writes without response, as fast as canSendWriteWithoutResponse allows.

    /// The first writes go before this returns (`sync`: see `BenchPeripheral.startNotifying`).
    func startWriting(_ value: Data, count: Int) {
        queue.sync { [self] in
            writeValue = value
            writesLeft = count
            pumpWrites()
        }
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: CBPeripheral) { pumpWrites() }

    private func pumpWrites() {
        guard let peripheral, let characteristic else { return }
        var sent = 0
        while writesLeft > 0 && peripheral.canSendWriteWithoutResponse {
            peripheral.writeValue(writeValue, for: characteristic, type: .withoutResponse)
            writesLeft -= 1
            sent += 1
        }
        writesSent.add(sent)
    }

    // Reads, one after another.

    /// The first read goes before this returns (`sync`: see `BenchPeripheral.startNotifying`).
    func startReading(count: Int) {
        queue.sync { [self] in
            mode = .reads
            roundTrips.removeAll(keepingCapacity: true)
            roundTrips.reserveCapacity(count)
            readsLeft = count
            readNext()
        }
    }

    private func readNext() {
        readStart = wallNanoseconds()
        peripheral!.readValue(for: characteristic!)
    }

    func takeRoundTrips() -> [UInt64] { queue.sync { roundTrips } }
}

/// A peripheral manager and a central manager on one radio, connected and subscribed.
struct BenchPair {
    let radio: CBVirtualRadio
    let peripheral: BenchPeripheral
    let central: BenchCentral

    init(airTime: CBVirtualRadio.AirTime = .instant) {
        radio = CBVirtualRadio(clock: .virtual, seed: 7, airTime: airTime)
        peripheral = BenchPeripheral(radio: radio)
        central = BenchCentral(radio: radio)
        let central = central, peripheral = peripheral
        guard radio.run(until: { central.ready.value == 1 && peripheral.subscribers.value == 1 }, timeout: .seconds(30)) else {
            fatalError("the benchmark pair did not connect and subscribe")
        }
    }
}

// MARK: - Workloads

/// Workload 1: `updateValue` → `didUpdateValueFor`, back to back, honouring
/// `peripheralManagerIsReady`.
func apiNotify(_ pair: BenchPair, count: Int, size: Int) -> [Figure] {
    let central = pair.central
    let start = central.received.value
    let bytesBefore = central.received.byteCount
    let time = measureBoth {
        pair.peripheral.startNotifying(Data(repeating: 0x5A, count: size), count: count)
        guard pair.radio.run(until: { central.received.value - start >= count }, timeout: .seconds(3600)) else {
            fatalError("notify \(size) B: \(central.received.value - start)/\(count)")
        }
    }
    precondition(central.received.byteCount - bytesBefore == count * size, "values arrived cut")
    return [Figure(name: "notify_\(size)B_per_s", value: Double(count) / time.cpu, unit: "notif/s",
                   note: "updateValue → didUpdateValueFor, \(size)-byte values, instant air (\(Int(Double(count) / time.wall)) /s wall)")]
}

/// Workload 2: writes without response, paced by `canSendWriteWithoutResponse`, counted as
/// they reach `didReceiveWrite`.
func apiWriteWithoutResponse(_ pair: BenchPair, count: Int) -> [Figure] {
    let peripheral = pair.peripheral
    let start = peripheral.writesReceived.value
    let time = measureBoth {
        pair.central.startWriting(Data(repeating: 0x33, count: 20), count: count)
        guard pair.radio.run(until: { peripheral.writesReceived.value - start >= count }, timeout: .seconds(3600)) else {
            fatalError("write without response: \(peripheral.writesReceived.value - start)/\(count)")
        }
    }
    return [Figure(name: "write_cmd_20B_per_s", value: Double(count) / time.cpu, unit: "writes/s",
                   note: "writeValue(.withoutResponse) while canSendWriteWithoutResponse → didReceiveWrite (\(Int(Double(count) / time.wall)) /s wall)")]
}

/// Workload 3: `readValue` → `didReceiveRead` → `respond` → `didUpdateValueFor`, one at a
/// time, wall-clock round trips.
func apiReadRoundTrip(_ pair: BenchPair, count: Int) -> [Figure] {
    let central = pair.central
    let sleepsBefore = voluntaryContextSwitches()
    central.startReading(count: count)
    guard pair.radio.run(until: { central.readsDone.value >= count }, timeout: .seconds(3600)) else {
        fatalError("reads: \(central.readsDone.value)/\(count)")
    }
    let sleeps = Double(voluntaryContextSwitches() - sleepsBefore) / Double(count)
    let rtts = central.takeRoundTrips().sorted()
    let median = Double(rtts[rtts.count / 2]) / 1000
    let p99 = Double(rtts[min(rtts.count - 1, rtts.count * 99 / 100)]) / 1000
    return [
        Figure(name: "read_rtt_median_us", value: median, unit: "µs", note: "readValue → didReceiveRead → respond → didUpdateValueFor, wall clock"),
        Figure(name: "read_rtt_p99_us", value: p99, unit: "µs", note: "the same, 99th percentile of \(count)"),
        Figure(name: "read_rtt_thread_sleeps", value: sleeps, unit: "per read",
               note: "voluntary context switches of the whole process per round trip (each a thread that slept and had to be woken)"),
    ]
}

/// Workload 4: one scanning central (duplicates allowed) and `advertisers` peripheral
/// managers advertising every 100 ms; didDiscover calls per CPU second.
func apiAdvertisingReports(advertisers: Int, virtualSeconds: Int) -> [Figure] {
    let radio = CBVirtualRadio(clock: .virtual, seed: 11)
    let peripherals = (0..<advertisers).map { BenchPeripheral(radio: radio, name: "adv\($0)") }
    guard radio.run(until: { peripherals.allSatisfy { $0.advertising.value > 0 } }, timeout: .seconds(60)) else {
        fatalError("advertisers did not start")
    }
    let scanner = Scanner(radio: radio)
    guard radio.run(until: { scanner.poweredOn.value == 1 }) else { fatalError("scanner did not power on") }
    var reports = 0
    let time = measureBoth {
        scanner.start()
        radio.run(for: .seconds(virtualSeconds))
        reports = scanner.stop()
    }
    precondition(reports > 0)
    withExtendedLifetime(peripherals) {}
    return [Figure(name: "adv_reports_per_s", value: Double(reports) / time.cpu, unit: "reports/s",
                   note: "didDiscover calls, \(advertisers) advertisers at 100 ms, allowDuplicates, \(reports) in \(virtualSeconds) s radio time")]
}

/// A central that scans with duplicates and counts what it is told.
final class Scanner: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.scanner")
    private(set) var manager: CBCentralManager!
    let poweredOn = Count()
    let discovered = Count()
    /// Identifiers by local name (queue-confined), for `retrievePeripherals`.
    private(set) var identifiers: [String: UUID] = [:]
    private let recordIdentifiers: Bool

    init(radio: CBVirtualRadio, recordIdentifiers: Bool = false) {
        self.recordIdentifiers = recordIdentifiers
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: self, queue: queue) }
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { poweredOn.add() }
    }

    func start() {
        manager.scanForPeripherals(withServices: nil, options: [CBCentralManagerScanOptionAllowDuplicatesKey: !recordIdentifiers])
    }

    /// Stops and returns the number of reports (after the ones already queued arrived).
    func stop() -> Int {
        manager.stopScan()
        return queue.sync { discovered.value }
    }

    func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                        advertisementData: [String: Any], rssi RSSI: NSNumber) {
        discovered.add()
        if recordIdentifiers, let name = advertisementData[CBAdvertisementDataLocalNameKey] as? String {
            identifiers[name] = peripheral.identifier
        }
    }

    func takeIdentifiers() -> [String: UUID] { queue.sync { identifiers } }
}

/// The connection interval `setDesiredConnectionLatency(.low)` gets on the virtual radio: the
/// bottom of the range it asks for (15–30 ms, the shortest an iPhone accepts), which the
/// virtual central's controller picks.
let lowLatencyIntervalMicroseconds: Int64 = 15_000

/// Workload 5: timed air, 15 ms connection interval (`.low` latency), 2M PHY, 251-byte data
/// length; 244-byte notifications as fast as the link takes them, against the ceiling of the
/// radio's air-time model.
func apiTimedThroughput(virtualSeconds: Int) -> [Figure] {
    let pair = BenchPair(airTime: .timed)
    let peripheral = pair.peripheral, central = pair.central
    // What an app does for throughput: ask for the shortest interval; 2M (iOS asks by itself).
    peripheral.queue.sync { peripheral.manager.setDesiredConnectionLatency(.low, for: peripheral.subscriber!) }
    central.queue.sync { central.peripheral!.linuxSetPHY(.le2M) }
    pair.radio.run(for: .seconds(2))
    let valueLength = 244
    precondition(central.queue.sync { central.peripheral!.maximumWriteValueLength(for: .withoutResponse) } >= valueLength)
    peripheral.startNotifying(Data(repeating: 0x77, count: valueLength), count: nil)
    pair.radio.run(for: .milliseconds(500))
    let before = central.received.value
    let t0 = pair.radio.now
    // A whole number of connection events, so that the window holds no partial event.
    let interval = lowLatencyIntervalMicroseconds
    let events = Int64(virtualSeconds) * 1_000_000 / interval
    let time = measureBoth { pair.radio.run(for: .microseconds(events * interval)) }
    let received = central.received.value - before
    let elapsed = pair.radio.now - t0
    peripheral.stopNotifying()
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let throughput = Double(received * valueLength) / seconds
    let ceiling = linkLayerCeiling(intervalMicroseconds: interval, valueLength: valueLength)
    return [
        Figure(name: "timed_notify_244B_bytes_per_s", value: throughput, unit: "B/s",
               note: "244-byte notifications, \(interval / 1000) ms interval, 2M PHY, 251-byte PDUs, \(received) in \(String(format: "%.2f", seconds)) s radio time (\(String(format: "%.2f", time.cpu)) s CPU)"),
        Figure(name: "timed_ceiling_bytes_per_s", value: ceiling, unit: "B/s",
               note: "the air-time model's ceiling for that link (see BENCHMARKS.md)"),
        Figure(name: "timed_fraction_of_ceiling", value: throughput / ceiling, unit: "", note: "throughput / ceiling"),
    ]
}

/// The most ATT value bytes per second a connection can carry from peripheral to central in
/// the radio's air-time model: each exchange is the central's empty PDU, T_IFS, the
/// peripheral's data PDU (one notification: 2-byte header, 4-byte L2CAP header, 3-byte ATT
/// header, the value), T_IFS; as many whole exchanges as fit in an interval.
func linkLayerCeiling(intervalMicroseconds: Int64, valueLength: Int) -> Double {
    let ifs: Int64 = 150_000
    let empty = LEPHY.le2M.airTimeNanoseconds(pduOctets: 2)
    let data = LEPHY.le2M.airTimeNanoseconds(pduOctets: 2 + 4 + 3 + valueLength)
    let exchange = empty + ifs + data + ifs
    let perEvent = (intervalMicroseconds * 1000) / exchange
    return Double(perEvent * Int64(valueLength)) / (Double(intervalMicroseconds) / 1e6)
}

/// Workload 6: `count` centrals each connected to its own peripheral manager, in one process.
/// Run in a fresh child process (see main.swift) so that memory freed by other workloads does
/// not hide what the connections take.
func apiConnections(count: Int) -> [Figure] {
    let rssStart = residentKiB()
    // The radio remembers every peripheral's identifier (by default it keeps 1,024).
    let radio = CBVirtualRadio(clock: .virtual, seed: 13, airTime: .instant, rememberedPeers: max(1024, 2 * count))
    let advertising = Count()
    let peripherals = (0..<count).map { BenchPeripheral(radio: radio, name: "p\($0)", advertisingTotal: advertising) }
    guard radio.run(until: { advertising.value >= count }, timeout: .seconds(60)) else {
        fatalError("advertisers did not start")
    }
    // One scan learns every peripheral's identifier; each central then connects by identifier.
    let scanner = Scanner(radio: radio, recordIdentifiers: true)
    guard radio.run(until: { scanner.poweredOn.value == 1 }) else { fatalError("scanner did not power on") }
    scanner.start()
    guard radio.run(until: { scanner.discovered.value >= count }, timeout: .seconds(60)) else { fatalError("scan") }
    radio.run(for: .milliseconds(300))
    _ = scanner.stop()
    let identifiers = scanner.takeIdentifiers()
    precondition(identifiers.count == count, "found \(identifiers.count)/\(count)")
    // The waits' conditions run after every delegate callback: a count over all centrals is one
    // read where a walk over them made the harness itself quadratic in `count`.
    let totals = Connector.Totals()
    let centrals = (0..<count).map { _ in Connector(radio: radio, totals: totals) }
    guard radio.run(until: { totals.poweredOn.value == count }) else { fatalError("centrals") }
    let rssDevices = residentKiB()
    let time = measureBoth {
        for (index, central) in centrals.enumerated() { central.connect(identifiers["p\(index)"]!) }
        guard radio.run(until: { totals.connected.value == count }, timeout: .seconds(600)) else {
            fatalError("connected \(centrals.filter { $0.connected.value == 1 }.count)/\(count)")
        }
    }
    let rssConnected = residentKiB()
    withExtendedLifetime((peripherals, centrals, scanner)) {}
    return [
        Figure(name: "conn_\(count)_setup_s", value: time.cpu, unit: "s CPU",
               note: "\(count) connect(_:) calls → didConnect, \(String(format: "%.2f", time.wall)) s wall"),
        Figure(name: "conn_\(count)_kib_per_connection", value: (rssConnected - rssDevices) / Double(count), unit: "KiB",
               note: "resident memory the connections added, both ends"),
        Figure(name: "conn_\(count)_kib_per_device_pair", value: (rssConnected - rssStart) / Double(count), unit: "KiB",
               note: "resident memory per connected central + peripheral manager, devices included"),
    ]
}

/// A central that connects to one peripheral by identifier.
final class Connector: NSObject, CBCentralManagerDelegate, @unchecked Sendable {
    let queue = DispatchQueue(label: "bench.connector")
    private(set) var manager: CBCentralManager!
    let poweredOn = Count()
    let connected = Count()
    private var peripheral: CBPeripheral?
    /// Counts shared by many connectors, if given.
    private let totals: Totals?

    final class Totals: Sendable {
        let poweredOn = Count()
        let connected = Count()
    }

    init(radio: CBVirtualRadio, totals: Totals? = nil) {
        self.totals = totals
        super.init()
        manager = CBVirtualRadio.withCurrent(radio) { CBCentralManager(delegate: self, queue: queue) }
    }

    func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn {
            poweredOn.add()
            totals?.poweredOn.add()
        }
    }

    func connect(_ identifier: UUID) {
        queue.async { [self] in
            guard let peripheral = manager.retrievePeripherals(withIdentifiers: [identifier]).first else { fatalError("unknown") }
            self.peripheral = peripheral
            manager.connect(peripheral, options: nil)
        }
    }

    func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        connected.add()
        totals?.connected.add()
    }
}
