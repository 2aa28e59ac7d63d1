import AsyncExampleApps
import CoreBluetooth
import ExampleApps
import Foundation
import Testing

/// The async-style examples (`swift run HeartRateMonitor`, `swift run AsyncEchoServer`) end to
/// end on a private wall-clock radio: async code awaits delegate events that a virtual clock
/// would deliver only while a thread drives it.
@Suite(.timeLimit(.minutes(1)))
struct AsyncExampleTests {
    @Test func heartRateMonitorReadsTheLocationAndGetsTheSensorsMeasurements() async throws {
        let radio = CBVirtualRadio(clock: .realTime)
        let (sensorManager, central) = CBVirtualRadio.withCurrent(radio) {
            (CBPeripheralManager(delegate: nil, queue: DispatchQueue(label: "sensor")),
             CBCentralManager(delegate: nil, queue: DispatchQueue(label: "monitor")))
        }
        let sensorLog = ExampleLog()
        let sensor = Task { try await HeartRateSensor(manager: sensorManager, log: sensorLog).run(interval: .milliseconds(5)) }
        defer { sensor.cancel() }
        let log = ExampleLog()
        let measurements = try await HeartRateMonitor(central: central, log: log).run(measurements: 4)
        #expect(measurements == (0 ..< 4).map(HeartRateSensor.measurement))
        #expect(log.all.first == "scanning for heart rate sensors")
        #expect(log.contains("sensor worn on the chest"))
        #expect(log.all.filter { $0.hasSuffix(" bpm") } == measurements.map { "\($0.bpm) bpm" })
        #expect(log.all.last == "disconnected")
        #expect(sensorLog.all.prefix(2) == ["advertising as HeartRate", "a monitor subscribed"])
    }

    @Test func theBooksEchoClientGetsItsMessageBackFromTheAsyncEchoServer() async throws {
        let radio = CBVirtualRadio(clock: .realTime)
        let message = "hello, this message is longer than one twenty-byte packet"
        let serverLog = ExampleLog()
        let manager = CBVirtualRadio.withCurrent(radio) { CBPeripheralManager(delegate: nil, queue: DispatchQueue(label: "echo")) }
        let server = Task { try await AsyncEchoServer(manager: manager, log: serverLog).run() }
        defer { server.cancel() }
        let done = AsyncStream.makeStream(of: String?.self)
        let client = CBVirtualRadio.withCurrent(radio) {
            EchoClientCentral(message: message, queue: DispatchQueue(label: "echo-client")) { failure in
                done.continuation.yield(failure)
            }
        }
        var results = done.stream.makeAsyncIterator()
        let failure = await results.next()
        #expect(failure == .some(nil))
        let expected = Data((message + "\n\0").utf8)
        #expect(client.echoed == expected)
        // Each 20-byte chunk was echoed as it came.
        let chunks = stride(from: 0, to: expected.count, by: 20).map { min(20, expected.count - $0) }
        #expect(serverLog.all.filter { $0.hasPrefix("echoing") }.map { Int($0.split(separator: " ")[1]) } == chunks)
    }

    @Test(arguments: [
        ("06 48", HeartRateMeasurement(bpm: 72, sensorContact: true)),
        ("04 48", HeartRateMeasurement(bpm: 72, sensorContact: false)),
        ("00 3C", HeartRateMeasurement(bpm: 60)),
        ("01 2C 01", HeartRateMeasurement(bpm: 300)),
        ("0E 50 10 27", HeartRateMeasurement(bpm: 80, sensorContact: true, energyExpended: 10_000)),
        ("16 4B 33 03 40 03", HeartRateMeasurement(bpm: 75, sensorContact: true, rrIntervals: [819, 832])),
    ])
    func heartRateMeasurementCoding(hex: String, measurement: HeartRateMeasurement) throws {
        let bytes = Data(hex.split(separator: " ").map { UInt8($0, radix: 16)! })
        #expect(HeartRateMeasurement(bytes) == measurement)
        #expect(measurement.encoded == bytes)
    }

    @Test(arguments: ["", "01 2C", "08 50 10", "10 4B 33"])
    func truncatedMeasurementsAreRefused(hex: String) {
        let bytes = Data(hex.split(separator: " ").map { UInt8($0, radix: 16)! })
        // An RR interval cut short is dropped; the others are refused.
        if hex == "10 4B 33" {
            #expect(HeartRateMeasurement(bytes) == HeartRateMeasurement(bpm: 75))
        } else {
            #expect(HeartRateMeasurement(bytes) == nil)
        }
    }
}
