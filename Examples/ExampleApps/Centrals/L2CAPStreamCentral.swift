import CoreBluetooth
import Foundation

/// An iOS-style L2CAP client, written only against Apple's API: finds `L2CAPEchoPeripheral`,
/// reads the PSM from Apple's PSM characteristic, opens the channel and streams `byteCount`
/// bytes through it, with the streams scheduled on `runLoop`, checking the echo byte for byte.
/// `openAgain()` then opens the same PSM once more (refused after the peripheral unpublished it).
public final class L2CAPStreamCentral: NSObject, CBCentralManagerDelegate, CBPeripheralDelegate, StreamDelegate,
    @unchecked Sendable
{
    public let log: ExampleLog
    private let runLoop: RunLoop
    private let payload: [UInt8]
    private(set) public var centralManager: CBCentralManager!
    private let state = Protected((peripheral: CBPeripheral?.none, psm: CBL2CAPPSM?.none, echoed: 0, matches: true,
                                   done: false, refused: false))
    /// The open channel (releasing it closes it), from the delegate queue and the run loop.
    private let channel = Protected<CBL2CAPChannel?>(nil)
    /// Bytes written so far: on the run loop's thread only.
    private var offset = 0

    /// Every byte sent came back, in order.
    public var isDone: Bool { state.value.done }
    /// The echo so far matched what was sent.
    public var echoMatches: Bool { state.value.matches }
    public var echoedCount: Int { state.value.echoed }
    /// A second open (after `openAgain()`) failed with an error.
    public var secondOpenRefused: Bool { state.value.refused }

    public init(byteCount: Int, runLoop: RunLoop, queue: DispatchQueue? = nil, log: ExampleLog = ExampleLog()) {
        // Not a repeating pattern of the chunk size, so a lost or repeated chunk shows.
        payload = (0..<byteCount).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 8) }
        self.runLoop = runLoop
        self.log = log
        super.init()
        centralManager = CBCentralManager(delegate: self, queue: queue)
    }

    /// Opens the PSM once more; `secondOpenRefused` tells how it went.
    public func openAgain() {
        let (peripheral, psm) = state.value.peripheral.map { ($0, state.value.psm) } ?? (nil, nil)
        guard let peripheral, let psm else { return }
        peripheral.openL2CAPChannel(psm)
    }

    public func centralManagerDidUpdateState(_ central: CBCentralManager) {
        if central.state == .poweredOn { central.scanForPeripherals(withServices: [L2CAPEchoPeripheral.serviceUuid]) }
    }

    public func centralManager(_ central: CBCentralManager, didDiscover peripheral: CBPeripheral,
                               advertisementData: [String: Any], rssi RSSI: NSNumber) {
        guard state.update({ state -> Bool in
            guard state.peripheral == nil else { return false }
            state.peripheral = peripheral
            return true
        }) else { return }
        central.stopScan()
        log("connecting...")
        central.connect(peripheral)
    }

    public func centralManager(_ central: CBCentralManager, didConnect peripheral: CBPeripheral) {
        peripheral.delegate = self
        peripheral.discoverServices([L2CAPEchoPeripheral.serviceUuid])
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverServices error: Error?) {
        guard let service = peripheral.services?.first else { return log("no service") }
        peripheral.discoverCharacteristics([CBUUID(string: CBUUIDL2CAPPSMCharacteristicString)], for: service)
    }

    public func peripheral(_ peripheral: CBPeripheral, didDiscoverCharacteristicsFor service: CBService, error: Error?) {
        guard let characteristic = service.characteristics?.first else { return log("no PSM characteristic") }
        peripheral.readValue(for: characteristic)
    }

    public func peripheral(_ peripheral: CBPeripheral, didUpdateValueFor characteristic: CBCharacteristic, error: Error?) {
        guard let value = characteristic.value, value.count == 2 else { return log("the PSM characteristic is malformed") }
        let psm = CBL2CAPPSM(value[value.startIndex]) | CBL2CAPPSM(value[value.startIndex + 1]) << 8
        state.update { $0.psm = psm }
        log("opening PSM \(psm)")
        peripheral.openL2CAPChannel(psm)
    }

    public func peripheral(_ peripheral: CBPeripheral, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else {
            log("the channel could not be opened: \(error?.localizedDescription ?? "unknown error")")
            state.update { $0.refused = true }
            return
        }
        if state.value.done {
            log("a second channel opened")
            return
        }
        log("channel open, streaming \(payload.count) bytes")
        self.channel.update { $0 = channel }
        for stream in [channel.inputStream! as Stream, channel.outputStream!] {
            stream.delegate = self
            stream.schedule(in: runLoop, forMode: .default)
            stream.open()
        }
    }

    public func stream(_ stream: Stream, handle event: Stream.Event) {
        guard let channel = channel.value else { return }
        while offset < payload.count, channel.outputStream.hasSpaceAvailable {
            let written = payload[offset...].withUnsafeBufferPointer {
                channel.outputStream.write($0.baseAddress!, maxLength: min(4096, $0.count))
            }
            guard written > 0 else { break }
            offset += written
        }
        var buffer = [UInt8](repeating: 0, count: 8192)
        while channel.inputStream.hasBytesAvailable {
            let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
            guard count > 0 else { break }
            let done = state.update { state -> Bool in
                state.matches = state.matches && state.echoed + count <= payload.count
                    && payload[state.echoed..<state.echoed + count].elementsEqual(buffer[0..<count])
                state.echoed += count
                if state.echoed >= payload.count { state.done = true }
                return state.done
            }
            if done {
                log("\(payload.count) bytes echoed\(echoMatches ? ", intact" : ", CORRUPTED")")
                // Closing both streams closes the channel.
                channel.inputStream.close()
                channel.outputStream.close()
                self.channel.update { $0 = nil }
                break
            }
        }
    }
}
