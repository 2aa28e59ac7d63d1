import CoreBluetooth
import Foundation

/// An iOS-style L2CAP server, written only against Apple's API: publishes a channel, puts its
/// PSM in Apple's PSM characteristic (`CBUUIDL2CAPPSMCharacteristicString`) in its service so
/// centrals can find it, advertises, and echoes every byte a central sends on a channel, with
/// the streams scheduled on `runLoop` (the main one in an app). `unpublish()` stops new channels.
public final class L2CAPEchoPeripheral: NSObject, CBPeripheralManagerDelegate, StreamDelegate, @unchecked Sendable {
    public static let advertisedName = "L2CAPEcho"
    public static let serviceUuid = CBUUID(string: "5E5E3001-0000-1000-8000-00805F9B34FB")

    public let log: ExampleLog
    private let runLoop: RunLoop
    private(set) public var peripheralManager: CBPeripheralManager!
    private let state = Protected((psm: CBL2CAPPSM?.none, advertising: false, echoed: 0))
    /// The open channels (releasing one closes it), from the delegate queue and the run loop.
    private let channels = Protected<[CBL2CAPChannel]>([])
    /// Bytes read and not yet written back, per channel: on the run loop's thread only.
    private var pending: [ObjectIdentifier: [UInt8]] = [:]

    /// The published PSM, once published.
    public var psm: CBL2CAPPSM? { state.value.psm }
    public var isAdvertising: Bool { state.value.advertising }
    /// Bytes echoed so far, on every channel.
    public var echoed: Int { state.value.echoed }

    public init(runLoop: RunLoop, queue: DispatchQueue? = nil, log: ExampleLog = ExampleLog()) {
        self.runLoop = runLoop
        self.log = log
        super.init()
        peripheralManager = CBPeripheralManager(delegate: self, queue: queue)
    }

    /// Stops accepting channels (those open stay open).
    public func unpublish() {
        guard let psm else { return }
        peripheralManager.unpublishL2CAPChannel(psm)
    }

    public func peripheralManagerDidUpdateState(_ peripheral: CBPeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        peripheral.publishL2CAPChannel(withEncryption: false)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didPublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        if let error { return log("Problem publishing the channel: \(error.localizedDescription)") }
        state.update { $0.psm = PSM }
        log("published L2CAP channel on PSM \(PSM)")
        let service = CBMutableService(type: Self.serviceUuid, primary: true)
        // Apple's PSM characteristic: the PSM as a little-endian UInt16.
        service.characteristics = [
            CBMutableCharacteristic(type: CBUUID(string: CBUUIDL2CAPPSMCharacteristicString), properties: [.read],
                                    value: Data([UInt8(PSM & 0xFF), UInt8(PSM >> 8)]), permissions: [.readable])
        ]
        peripheral.add(service)
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didAdd service: CBService, error: Error?) {
        if let error { return log("Problem adding service: \(error.localizedDescription)") }
        peripheral.startAdvertising([CBAdvertisementDataLocalNameKey: Self.advertisedName,
                                     CBAdvertisementDataServiceUUIDsKey: [Self.serviceUuid]])
    }

    public func peripheralManagerDidStartAdvertising(_ peripheral: CBPeripheralManager, error: Error?) {
        if let error { return log("Problem starting advertising: \(error.localizedDescription)") }
        state.update { $0.advertising = true }
        log("advertising as \(Self.advertisedName)")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didUnpublishL2CAPChannel PSM: CBL2CAPPSM, error: Error?) {
        log(error == nil ? "unpublished PSM \(PSM)" : "Problem unpublishing: \(error!.localizedDescription)")
    }

    public func peripheralManager(_ peripheral: CBPeripheralManager, didOpen channel: CBL2CAPChannel?, error: Error?) {
        guard let channel else { return log("Problem opening a channel: \(error?.localizedDescription ?? "unknown")") }
        log("a central opened a channel on PSM \(channel.psm)")
        // Keep the channel (releasing it closes it); its events come on the run loop.
        channels.update { $0.append(channel) }
        for stream in [channel.inputStream! as Stream, channel.outputStream!] {
            stream.delegate = self
            stream.schedule(in: runLoop, forMode: .default)
            stream.open()
        }
    }

    public func stream(_ stream: Stream, handle event: Stream.Event) {
        guard let channel = channels.value.first(where: { $0.inputStream === stream || $0.outputStream === stream }) else { return }
        let key = ObjectIdentifier(channel)
        if event.contains(.hasBytesAvailable) {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while channel.inputStream.hasBytesAvailable {
                let count = channel.inputStream.read(&buffer, maxLength: buffer.count)
                guard count > 0 else { break }
                pending[key, default: []] += buffer[0..<count]
            }
        }
        while let bytes = pending[key], !bytes.isEmpty, channel.outputStream.hasSpaceAvailable {
            let written = channel.outputStream.write(bytes, maxLength: bytes.count)
            guard written > 0 else { break }
            pending[key]?.removeFirst(written)
            state.update { $0.echoed += written }
        }
        if event.contains(.endEncountered) {
            log("the channel closed after \(echoed) bytes echoed")
            channel.inputStream.close()
            channel.outputStream.close()
            channels.update { $0.removeAll { $0 === channel } }
            pending[key] = nil
        }
    }
}
