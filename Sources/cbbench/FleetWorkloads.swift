import CoreBluetooth
import Foundation

// Issue 19: a simulated fleet on timed air, through Apple's API (plus the Linux extensions a
// simulation needs: the radio's clock, a timer on it, a 7.5 ms connection interval).

/// Sends one value every `period` of the radio's time from a connected `BenchPeripheral`, on
/// a timer on the manager's clock (`linuxSchedule`), as a sensor that reports every connection
/// event does.
final class PeriodicNotifier: @unchecked Sendable {
    // `@unchecked Sendable`: everything below is touched on `peripheral.queue` only (the
    // timer's body runs there, and `start`/`stop` hop there with `sync`).
    private let peripheral: BenchPeripheral
    private let value: Data
    private let period: TimeInterval
    private var timer: CBLinuxTimer?
    private var running = false
    /// Values `updateValue` refused (a full queue): none expected at one per event.
    private(set) var refused = 0

    init(_ peripheral: BenchPeripheral, value: Data, period: TimeInterval) {
        self.peripheral = peripheral
        self.value = value
        self.period = period
    }

    /// Sync, from the driving thread while it holds the radio's clock: the first timer is set
    /// before the clock runs (a block merely queued would not hold it).
    func start() {
        peripheral.queue.sync {
            running = true
            schedule()
        }
    }

    func stop() -> Int {
        peripheral.queue.sync {
            running = false
            timer?.cancel()
            return refused
        }
    }

    private func schedule() {
        timer = peripheral.manager.linuxSchedule(after: period) { [self] in
            guard running else { return }
            // The next one first: the timer's deadline is taken from the radio's time now,
            // which stands still while this callback holds the clock.
            schedule()
            if !peripheral.manager.updateValue(value, for: peripheral.characteristic, onSubscribedCentrals: nil) {
                refused += 1
            }
        }
    }
}

/// `fleet_timed_speedup`: timed air; `advertisers` peripheral managers advertising every
/// 100 ms (nobody scanning) and `connections` central–peripheral manager pairs on a 7.5 ms
/// connection interval, each peripheral notifying 20 bytes every 7.5 ms (one value per
/// connection event). The figure: seconds of radio time simulated per CPU second of the
/// whole process.
func apiFleetTimed(advertisers: Int, connections: Int, virtualSeconds: Int) -> [Figure] {
    let radio = CBVirtualRadio(clock: .virtual, seed: 19, airTime: .timed)
    let period: TimeInterval = 0.0075
    let peripherals = (0..<connections).map { BenchPeripheral(radio: radio, name: "fleet\($0)") }
    let centrals = (0..<connections).map { BenchCentral(radio: radio, connectingTo: "fleet\($0)") }
    guard radio.run(until: { centrals.allSatisfy { $0.ready.value == 1 } && peripherals.allSatisfy { $0.subscribers.value == 1 } },
                    timeout: .seconds(60)) else {
        fatalError("fleet: the connections did not come up")
    }
    // The advertisers after the connections: the centrals' scans would hear them all.
    let fleet = (0..<advertisers).map { BenchPeripheral(radio: radio, name: "adv\($0)") }
    guard radio.run(until: { fleet.allSatisfy { $0.advertising.value > 0 } }, timeout: .seconds(60)) else {
        fatalError("fleet: the advertisers did not start")
    }
    for central in centrals {
        central.queue.sync { central.peripheral!.linuxSetConnectionInterval(period) }
    }
    radio.run(for: .seconds(1))
    let notifiers = peripherals.map { PeriodicNotifier($0, value: Data(repeating: 0x20, count: 20), period: period) }
    for notifier in notifiers { notifier.start() }
    radio.run(for: .milliseconds(500))
    let before = centrals.reduce(0) { $0 + $1.received.value }
    let t0 = radio.now
    let time = measureBoth { radio.run(for: .seconds(virtualSeconds)) }
    let received = centrals.reduce(0) { $0 + $1.received.value } - before
    let elapsed = radio.now - t0
    let refused = notifiers.reduce(0) { $0 + $1.stop() }
    let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    // One value per 7.5 ms per connection: fewer means the links did not keep up (or the
    // interval was not taken), and the figure would flatter the simulation.
    let expected = Double(connections) * seconds / period
    precondition(Double(received) >= 0.98 * expected && refused == 0,
                 "fleet: \(received) notifications in \(seconds) s, expected ~\(Int(expected)); \(refused) refused")
    withExtendedLifetime((fleet, peripherals, centrals)) {}
    return [
        Figure(name: "fleet_timed_speedup", value: seconds / time.cpu, unit: "×",
               note: "radio s per CPU s: timed air, \(advertisers) advertisers at 100 ms, \(connections) links at 7.5 ms notifying 20 B per event (\(received) in \(String(format: "%.2f", seconds)) s radio, \(String(format: "%.3f", time.cpu)) s CPU)"),
    ]
}
